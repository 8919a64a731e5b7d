import { Budgets, TaskUsage } from '@runledger/contracts';
import { ResolvedBudgets } from '../discipline/settings';

/** The budgets a child takes out of its parent's: what one spends, the other no longer has. */
const CARVED = ['max_tokens', 'max_cost_usd', 'max_tool_calls', 'timeout_ms'] as const;
type CarvedKey = (typeof CARVED)[number];

export type Carve = { ok: true; budgets: Budgets } | { ok: false; error: string };

/** what the parent has spent of each carved budget (time: how long it has run) */
const spent = (usage: TaskUsage, elapsedMs: number): Record<CarvedKey, number> => ({
  max_tokens: usage.total_tokens,
  max_cost_usd: usage.cost_usd,
  max_tool_calls: usage.tool_calls,
  timeout_ms: elapsedMs,
});

/**
 * A child's budgets: what it asked for, each carved budget (tokens, cost, tool
 * calls, time) no more than what the parent has left, which is its limit less
 * what it spent (its ended children's usage included) and less what its
 * running children were given (time excepted: they run alongside it). Without
 * limits (no run discipline) the child gets what it asked for. Nothing left
 * of a budget the child cannot run without (tokens, cost, time) refuses it.
 */
export function carveBudgets(
  requested: Budgets | undefined,
  parent: ResolvedBudgets | null,
  usage: TaskUsage,
  elapsedMs: number,
  running: readonly Budgets[],
): Carve {
  const out: Budgets = { ...requested };
  if (!parent) return { ok: true, budgets: out };
  const used = spent(usage, elapsedMs);
  for (const key of CARVED) {
    const limit = parent[key];
    if (limit === null) continue;
    const reserved = key === 'timeout_ms' ? 0 : running.reduce((n, b) => n + (b[key] ?? 0), 0);
    const left = limit - used[key] - reserved;
    // a child may be given no tool calls (it can still answer), but it cannot run without tokens, cost or time;
    // time goes in whole seconds: a replay judges it by the recorded clock, a few ms from the live one
    const value =
      key === 'max_cost_usd'
        ? left
        : key === 'timeout_ms'
          ? Math.floor(left / 1000) * 1000
          : Math.floor(left);
    if (key === 'max_tool_calls' ? value < 0 : value <= 0)
      return {
        ok: false,
        error: `no ${key} left to delegate with (limit ${limit}, spent ${used[key]}, given to running children ${reserved})`,
      };
    out[key] = Math.min(requested?.[key] ?? value, value);
  }
  return { ok: true, budgets: out };
}
