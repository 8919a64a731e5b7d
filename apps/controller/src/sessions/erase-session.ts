import { MemoryService } from '@runledger/memory';
import { Erasure, ErasureReport, TreeErasureReport } from '@runledger/state-store';
import { companionStreams } from '../retention/companion-streams';

export interface SessionErasureResult extends ErasureReport {
  /** memory entries of the session that were live, now tombstoned and scrubbed */
  memory_entries: number;
}

export interface TreeErasureResult extends TreeErasureReport {
  /** memory entries written for a task of the tree that were live, now tombstoned and scrubbed */
  memory_entries: number;
}

/**
 * Erase a session (POST /sessions/:id/erase, `runledger erase`): its data keys destroyed, the read
 * models' copies scrubbed (Erasure), then its memory entries forgotten.
 */
export async function eraseSession(
  erasure: Erasure,
  memory: MemoryService | null,
  sessionId: string,
): Promise<SessionErasureResult> {
  const report = await erasure.erase(sessionId);
  const memoryEntries = memory ? await memory.forgetSession(sessionId) : 0;
  return { ...report, memory_entries: memoryEntries };
}

/**
 * Erase the task tree a task belongs to (POST /tasks/:id/erase, `runledger erase --task`): the keys
 * of its streams (with their outbound deliveries) destroyed, its rows and checkpoints scrubbed, its
 * memory entries forgotten; the session's other trees are left as they are.
 */
export async function eraseTaskTree(
  erasure: Erasure,
  memory: MemoryService | null,
  taskId: string,
): Promise<TreeErasureResult> {
  const report = await erasure.eraseTree(taskId, companionStreams);
  const memoryEntries = memory ? await memory.forgetTasks(report.task_ids) : 0;
  return { ...report, memory_entries: memoryEntries };
}

const counts = (r: SessionErasureResult | TreeErasureResult): string =>
  `${r.task_ids.length} task(s), ${r.sealed_events} sealed event(s) shredded` +
  (r.archived_events > 0 ? `, ${r.archived_events} archived event(s) erased` : '') +
  (r.clear_events > 0 ? `, ${r.clear_events} event(s) stored in clear now served as erased` : '') +
  `, ${r.checkpoints_deleted} checkpoint(s) deleted, ${r.memory_entries} memory entr${r.memory_entries === 1 ? 'y' : 'ies'} forgotten`;

/** The CLI's line for a session's erasure. */
export const erasureText = (r: SessionErasureResult): string =>
  `${r.key_destroyed ? 'erased' : 'already erased; copies scrubbed again:'} session ${r.session_id}: ${counts(r)}`;

/** The CLI's line for a task tree's erasure. */
export const treeErasureText = (r: TreeErasureResult): string =>
  `${r.key_destroyed ? 'erased' : 'already erased; copies scrubbed again:'} task tree ${r.root_task_id} ` +
  `of session ${r.session_id}: ${counts(r)}`;
