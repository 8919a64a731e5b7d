import { MemoryService } from '@runledger/memory';
import { ErasureReport, SessionErasure } from '@runledger/state-store';

export interface SessionErasureResult extends ErasureReport {
  /** memory entries of the session that were live, now tombstoned and scrubbed */
  memory_entries: number;
}

/**
 * Erase a session (POST /sessions/:id/erase, `runledger erase`): its data key destroyed, the read
 * models' copies scrubbed (SessionErasure), then its memory entries forgotten.
 */
export async function eraseSession(
  erasure: SessionErasure,
  memory: MemoryService | null,
  sessionId: string,
): Promise<SessionErasureResult> {
  const report = await erasure.erase(sessionId);
  const memoryEntries = memory ? await memory.forgetSession(sessionId) : 0;
  return { ...report, memory_entries: memoryEntries };
}

/** The CLI's line for an erasure. */
export const erasureText = (r: SessionErasureResult): string =>
  `${r.key_destroyed ? 'erased' : 'already erased; copies scrubbed again:'} session ${r.session_id}: ` +
  `${r.task_ids.length} task(s), ${r.sealed_events} sealed event(s) shredded` +
  (r.clear_events > 0 ? `, ${r.clear_events} event(s) stored in clear now served as erased` : '') +
  `, ${r.checkpoints_deleted} checkpoint(s) deleted, ${r.memory_entries} memory entr${r.memory_entries === 1 ? 'y' : 'ies'} forgotten`;
