import { SessionTurn } from '@runledger/contracts';
import { HistoryItem } from '../model/model-backend';

/**
 * The earlier tasks of a session, as a task's history shows them: one history item each, before
 * the task's own rounds, so the prompt budget treats them as its oldest history (trimmed or
 * summarised by the utility role first). They carry negative rounds, oldest lowest, so they never
 * meet a round of the task's own.
 */
export const SESSION_TURN = 'session_turn';

/** A history item that stands for earlier tasks of the session (a turn, or a summary of turns only). */
export const isSessionItem = (h: HistoryItem): boolean => h.round < 0;

export function sessionHistoryItems(turns: readonly SessionTurn[]): HistoryItem[] {
  return turns.map((t, i) => ({
    round: i - turns.length,
    directive: { [SESSION_TURN]: t.task_id },
    results: [`asked: ${t.input}`, `answer (${t.stop_reason}): ${t.answer ?? '(none)'}`],
    ok: t.stop_reason === 'completed',
  }));
}

/** The task id a session item names, or null for any other item. */
export function sessionTaskOf(h: HistoryItem): string | null {
  const d = h.directive as Record<string, unknown> | null;
  return isSessionItem(h) && d && typeof d === 'object' && typeof d[SESSION_TURN] === 'string'
    ? (d[SESSION_TURN] as string)
    : null;
}
