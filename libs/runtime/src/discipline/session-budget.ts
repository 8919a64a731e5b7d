import { SessionBudget, TaskUsage } from '@runledger/contracts';
import type { BudgetExceeded } from './budgets';
import { ResolvedBudgets } from './settings';

/**
 * A session's budget across its tasks, judged for one task: what the session's earlier tasks had
 * spent when the task was received (recorded in its TASK_RECEIVED) plus what the task has spent
 * since (its own fold, its ended children included). Pure: a resume or a replay judges the same.
 */

/** Less than this share of a session budget left: the session's earlier tasks give way in the prompt first. */
export const SESSION_NEAR_SHARE = 0.2;

export interface SessionSpend {
  used_tokens: number;
  used_cost_usd: number;
}

export const sessionSpend = (b: SessionBudget, usage: TaskUsage): SessionSpend => ({
  used_tokens: b.used_tokens + usage.total_tokens,
  used_cost_usd: b.used_cost_usd + usage.cost_usd,
});

/** Tokens the session has left (negative: overspent); null without a token limit. */
export const sessionTokensLeft = (b: SessionBudget, usage: TaskUsage): number | null =>
  b.max_tokens === null ? null : b.max_tokens - sessionSpend(b, usage).used_tokens;

const origin = (b: SessionBudget): string =>
  b.source === 'setting' ? "the session's setting" : `set by task ${b.set_by}`;

/**
 * The session budget overrun: before a round, a session with nothing left (used up to its limit)
 * starts none; before a tool, only a session already over its limit stops the task. Null when the
 * task has no session budget or it holds.
 */
export function sessionExceeded(
  b: SessionBudget | null,
  usage: TaskUsage,
  next: 'round' | 'tool_call',
): BudgetExceeded | null {
  if (!b) return null;
  const spend = sessionSpend(b, usage);
  const over = (used: number, max: number | null): boolean =>
    max !== null && (next === 'round' ? used >= max : used > max);
  if (over(spend.used_tokens, b.max_tokens))
    return {
      budget: 'session_max_tokens',
      limit: b.max_tokens!,
      actual: spend.used_tokens,
      role: null,
      detail:
        `the session used ${spend.used_tokens} tokens (${b.used_tokens} in its earlier tasks, ` +
        `${usage.total_tokens} in this one) of its session budget of ${b.max_tokens} ` +
        `(session_max_tokens, ${origin(b)})`,
    };
  if (over(spend.used_cost_usd, b.max_cost_usd))
    return {
      budget: 'session_max_cost_usd',
      limit: b.max_cost_usd!,
      actual: spend.used_cost_usd,
      role: null,
      detail:
        `the session cost $${spend.used_cost_usd.toFixed(6)} ($${b.used_cost_usd.toFixed(6)} in its earlier tasks, ` +
        `$${usage.cost_usd.toFixed(6)} in this one) of its session budget of $${b.max_cost_usd} ` +
        `(session_max_cost_usd, ${origin(b)})`,
    };
  return null;
}

/** Less than SESSION_NEAR_SHARE of a session limit left. */
export function sessionNear(b: SessionBudget, usage: TaskUsage): boolean {
  const spend = sessionSpend(b, usage);
  const near = (used: number, max: number | null): boolean =>
    max !== null && max - used < max * SESSION_NEAR_SHARE;
  return near(spend.used_tokens, b.max_tokens) || near(spend.used_cost_usd, b.max_cost_usd);
}

/** A task's session budget as a round's context weighs it. */
export interface SessionPressure extends SessionSpend {
  /** tokens the session has left (null: no token limit) */
  tokens_left: number | null;
  /** less than SESSION_NEAR_SHARE of a session limit left */
  near: boolean;
}

export function sessionPressureOf(b: SessionBudget | null, usage: TaskUsage): SessionPressure | null {
  if (!b) return null;
  return { ...sessionSpend(b, usage), tokens_left: sessionTokensLeft(b, usage), near: sessionNear(b, usage) };
}

/**
 * A parent's budgets as a delegation carves them: its token and cost limits lowered to what its
 * session has left, so a child never spends past the session's budget.
 */
export function withinSession(
  budgets: ResolvedBudgets,
  b: SessionBudget | null,
  usage: TaskUsage,
): ResolvedBudgets {
  if (!b) return budgets;
  // the carve subtracts the parent's own spend again, so the session's room is counted on top of it
  const room = (max: number | null, used: number, own: number): number | null =>
    max === null ? null : Math.max(0, max - used) + own;
  const tokens = room(b.max_tokens, sessionSpend(b, usage).used_tokens, usage.total_tokens);
  const cost = room(b.max_cost_usd, sessionSpend(b, usage).used_cost_usd, usage.cost_usd);
  return {
    ...budgets,
    max_tokens: tokens === null ? budgets.max_tokens : Math.min(budgets.max_tokens, tokens),
    max_cost_usd: cost === null ? budgets.max_cost_usd : Math.min(budgets.max_cost_usd ?? Infinity, cost),
  };
}
