import { RuntimeEvent } from '@runledger/contracts';
import {
  DEFAULT_BUDGET_MAXIMUMS,
  DEFAULT_DISCIPLINE_SETTINGS,
  DisciplineSettings,
  ResolvedBudgets,
} from '@runledger/runtime';

/**
 * The run discipline a server has with no RUNLEDGER_* budget set (the defaults users get: an
 * 8192-token context window, its trimming and compaction), budgets raised only where the workload
 * must not be stopped by them.
 */
export function serverDiscipline(budgets: Partial<ResolvedBudgets> = {}): DisciplineSettings {
  const raised: ResolvedBudgets = { ...DEFAULT_BUDGET_MAXIMUMS, ...budgets };
  return { ...DEFAULT_DISCIPLINE_SETTINGS, budgetDefaults: raised, budgetMaximums: raised };
}

/** Least-squares slope of y over x; 0 for fewer than two points. */
export function slope(points: ReadonlyArray<readonly [number, number]>): number {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((s, [x]) => s + x, 0) / n;
  const my = points.reduce((s, [, y]) => s + y, 0) / n;
  let num = 0;
  let den = 0;
  for (const [x, y] of points) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

/** The orchestrator's prompt size per round, from the task's MODEL_CALLED events (a round's first call). */
export function promptCharsPerRound(events: readonly RuntimeEvent[]): Array<[number, number]> {
  const byRound = new Map<number, number>();
  for (const e of events)
    if (e.type === 'MODEL_CALLED' && e.payload.role === 'orchestrator' && e.payload.round !== null)
      if (!byRound.has(e.payload.round)) byRound.set(e.payload.round, e.payload.prompt_chars);
  return [...byRound.entries()].sort(([a], [b]) => a - b);
}

/** A chat request's messages, as a model server receives them. */
export type WireMessage = {
  role: string;
  content?: string | null;
  tool_call_id?: string;
  tool_calls?: Array<{ id?: unknown; function?: { name?: unknown; arguments?: unknown } }>;
};
export const messagesOf = (body: Record<string, unknown>): WireMessage[] =>
  (body.messages as WireMessage[]) ?? [];
/** the task a request works for: the text after `## Task` in its user message */
export const taskOf = (body: Record<string, unknown>): string =>
  /## Task\n([\s\S]*)$/.exec(messagesOf(body).find((m) => m.role === 'user')?.content ?? '')?.[1].trim() ??
  '';
