import { SessionTurn, StopReason, isTerminalStatus } from '@runledger/contracts';
import { elideOutput } from '../loop/context-builder';
import type { SessionTask } from '../log/task-views';

/** Tasks of a session read when a task joins it: enough to find the latest ended ones among some still running. */
export const SESSION_TASKS_READ = 100;
/** How many of a session's latest ended tasks a new task of the session is shown. */
export const SESSION_HISTORY_MAX_TASKS = 20;
/** An input or answer longer than this is recorded with its middle elided (head and tail kept). */
export const SESSION_TEXT_MAX_CHARS = 16_000;

/**
 * What a task received now in the session is shown of it: the latest ended tasks (oldest first),
 * each text at most SESSION_TEXT_MAX_CHARS. A task still running has no answer yet and is left out.
 */
export function sessionTurnsOf(tasks: readonly SessionTask[]): SessionTurn[] {
  return tasks
    .filter(
      (t): t is SessionTask & { stop_reason: StopReason } =>
        isTerminalStatus(t.status) && t.stop_reason !== null,
    )
    .slice(-SESSION_HISTORY_MAX_TASKS)
    .map((t) => ({
      task_id: t.task_id,
      input: elideOutput(t.input, SESSION_TEXT_MAX_CHARS, null),
      answer: t.result === null ? null : elideOutput(t.result, SESSION_TEXT_MAX_CHARS, null),
      stop_reason: t.stop_reason,
    }));
}
