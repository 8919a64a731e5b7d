import { RuntimeEvent } from '@runledger/contracts';

/**
 * Whether a replay writes this recorded event again. Memory is never written by a replay, a
 * person's answers are in the log (the replay's permission policy allows what they allowed), and
 * a restart's resume marker belongs to the recording's process.
 */
export function reproducedInReplay(e: RuntimeEvent): boolean {
  switch (e.type) {
    // Checkpoints are derived from the log, not part of the run: where they fall depends on this
    // process's settings and on events a replay does not reproduce (permission answers).
    case 'CHECKPOINT_SAVED':
    case 'MEMORY_WRITTEN':
    case 'TASK_AWAITING_PERMISSION':
    case 'PERMISSION_RESOLVED':
    case 'TASK_AWAITING_SECRET':
    case 'SECRET_PROVIDED':
    case 'TASK_AWAITING_CLIENT_TOOL':
      return false;
    case 'GUARD_TRIGGERED':
      return e.payload.guard !== 'resumed';
    default:
      return true;
  }
}
