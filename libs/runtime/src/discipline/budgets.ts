import {
  Budgets,
  NewEvent,
  PriceTable,
  Role,
  RoleUsage,
  RuntimeEvent,
  TaskUsage,
  TokenUsage,
  addChildUsage,
  addRoleUsage,
  emptyUsage,
} from '@runledger/contracts';
import { SYS_UTIL } from '../model/sys-util-name';
import { SeenSet } from './seen-set';
import { BUDGET_KEYS, BudgetKey, ResolvedBudgets } from './settings';
import { estimateUsage } from '../model/usage-estimate';

export interface BudgetResolution {
  budgets: ResolvedBudgets;
  /** keys the task asked for above the configured maximum; they were lowered to it */
  capped: BudgetKey[];
}

const capOf = (value: number | null, max: number | null): number | null => {
  if (max === null) return value;
  if (value === null) return max;
  return Math.min(value, max);
};

/** Task budgets = config defaults overridden by the task's own, never above the configured maximum. */
export function resolveBudgets(
  requested: Budgets | undefined,
  defaults: ResolvedBudgets,
  maximums: ResolvedBudgets,
): BudgetResolution {
  const capped: BudgetKey[] = [];
  const out = { ...defaults };
  for (const key of BUDGET_KEYS) {
    const asked = requested?.[key];
    const max = maximums[key];
    if (asked !== undefined && max !== null && asked > max) capped.push(key);
    (out as Record<BudgetKey, number | null>)[key] = capOf(asked ?? defaults[key], max);
  }
  return { budgets: out, capped };
}

const priceOf = (model: string, prices: PriceTable) => prices[model] ?? prices['*'];

export function costOf(
  model: string,
  usage: Pick<TokenUsage, 'prompt_tokens' | 'completion_tokens'>,
  prices: PriceTable,
): number {
  const price = priceOf(model, prices);
  if (!price) return 0;
  return (
    (usage.prompt_tokens * price.input_per_mtok + usage.completion_tokens * price.output_per_mtok) / 1_000_000
  );
}

/**
 * Model calls recorded outside the gateway (a tool outcome hook's: the critic's)
 * priced with the same table, so they count in the task's cost and its
 * max_cost_usd. A call already priced, or of a model the table does not price,
 * is left as it is (a replay of a log recorded before critic calls were priced
 * still matches it).
 */
export function priceModelCalls(events: readonly NewEvent[], prices: PriceTable): NewEvent[] {
  return events.map((e) =>
    e.type === 'MODEL_RESPONDED' && e.payload.cost_usd === undefined && priceOf(e.payload.model, prices)
      ? { ...e, payload: { ...e.payload, cost_usd: costOf(e.payload.model, e.payload.usage, prices) } }
      : e,
  );
}

/** Meter state: the usage so far plus what a pending model call needs to be estimated on response. */
export interface MeterState {
  usage: TaskUsage;
  pendingCalls: Record<string, { prompt_chars: number }>;
  /** the distinct rounds whose context was built */
  rounds: SeenSet<number>;
  /** created_at of TASK_RECEIVED, for the end-to-end timeout */
  startedAt: string | null;
  /** time spent waiting for a person (permission, secret) does not count against the task's time budget */
  waitedMs: number;
  waitingSince: string | null;
}

export interface MeterOptions {
  /** for calls recorded without usage; cost is taken from the event (priced when recorded) */
  charsPerToken?: number;
}

export const initialMeterState = (): MeterState => ({
  usage: emptyUsage(),
  pendingCalls: {},
  rounds: SeenSet.empty(),
  startedAt: null,
  waitedMs: 0,
  waitingSince: null,
});

/** How long the task has been running, waits for a person excluded. */
export function activeMs(state: MeterState, now: Date): number {
  if (!state.startedAt) return 0;
  const waiting = state.waitingSince ? now.getTime() - Date.parse(state.waitingSince) : 0;
  return Math.max(0, now.getTime() - Date.parse(state.startedAt) - state.waitedMs - waiting);
}

const addRole = (usage: TaskUsage, role: Role, patch: Partial<RoleUsage>): TaskUsage => ({
  ...usage,
  by_role: addRoleUsage(usage, role, patch),
});

/** A wait for a person, the client or a timer ended at `at`: its time is not the task's running time. */
function waitEnded(state: MeterState, at: string): MeterState {
  if (!state.waitingSince) return state;
  return {
    ...state,
    waitingSince: null,
    waitedMs: state.waitedMs + Math.max(0, Date.parse(at) - Date.parse(state.waitingSince)),
  };
}

/**
 * Pure fold of one event into the meter. Usage is derived from the log only,
 * so a resumed task meters exactly what it had spent before the restart.
 * Rounds are the distinct CONTEXT_BUILT rounds (a round that ended in a
 * reminder is a round too); failures are failed tool calls, failed model
 * calls and plans that failed as a whole; cost is what MODEL_RESPONDED recorded
 * (`costOf` at record time).
 */
export function meterEvolve(state: MeterState, event: RuntimeEvent, options: MeterOptions = {}): MeterState {
  const u = state.usage;
  switch (event.type) {
    case 'TASK_RECEIVED':
      return { ...state, startedAt: state.startedAt ?? event.created_at };
    case 'TASK_AWAITING_PERMISSION':
    case 'TASK_AWAITING_SECRET':
    case 'TASK_AWAITING_CLIENT_TOOL':
      return { ...state, waitingSince: state.waitingSince ?? event.created_at };
    case 'TIMER_SET':
    case 'SIGNAL_AWAITED':
      if (event.payload.counts_against_timeout) return state;
      return { ...state, waitingSince: state.waitingSince ?? event.created_at };
    case 'PERMISSION_RESOLVED':
    case 'SECRET_PROVIDED':
    case 'TIMER_FIRED':
    case 'SIGNAL_DELIVERED':
      return waitEnded(state, event.created_at);
    case 'CONTEXT_BUILT': {
      const round = event.payload.round;
      if (state.rounds.has(round)) return state;
      return { ...state, rounds: state.rounds.with(round), usage: { ...u, rounds: u.rounds + 1 } };
    }
    case 'TOOL_CALLED':
      return { ...state, usage: { ...u, tool_calls: u.tool_calls + 1 } };
    case 'TOOL_COMPLETED':
      // the client's answer for a tool it ran ends the wait for it
      return event.payload.request_id ? waitEnded(state, event.created_at) : state;
    case 'TOOL_FAILED': {
      const failed = { ...state, usage: { ...u, failures: u.failures + 1 } };
      return event.payload.request_id ? waitEnded(failed, event.created_at) : failed;
    }
    case 'CHILD_TASK_ENDED':
      return { ...state, usage: addChildUsage(u, event.payload.usage) };
    case 'PLAN_FAILED':
      // A failed step is already counted by its tool outcome; a plan that failed as a whole (a cycle) is a failure of its own.
      return event.payload.failed_step === null
        ? { ...state, usage: { ...u, failures: u.failures + 1 } }
        : state;
    case 'MODEL_CALLED': {
      const usage = addRole({ ...u, model_calls: u.model_calls + 1 }, event.payload.role, { model_calls: 1 });
      return {
        ...state,
        usage,
        pendingCalls: {
          ...state.pendingCalls,
          [event.payload.call_id]: { prompt_chars: event.payload.prompt_chars },
        },
      };
    }
    case 'MODEL_RESPONDED': {
      const p = event.payload;
      const { [p.call_id]: pending, ...rest } = state.pendingCalls;
      const reported = p.usage.total_tokens > 0 || p.usage.prompt_tokens > 0 || p.usage.completion_tokens > 0;
      // sys_util is no model: its answers cost no tokens, so there is nothing to estimate
      const tokens =
        reported || p.error || p.model === SYS_UTIL
          ? p.usage
          : estimateUsage(pending?.prompt_chars ?? 0, p.content?.length ?? 0, options.charsPerToken);
      const cost = p.cost_usd ?? 0;
      let usage: TaskUsage = {
        ...u,
        failures: u.failures + (p.error ? 1 : 0),
        prompt_tokens: u.prompt_tokens + tokens.prompt_tokens,
        completion_tokens: u.completion_tokens + tokens.completion_tokens,
        total_tokens: u.total_tokens + tokens.prompt_tokens + tokens.completion_tokens,
        cost_usd: u.cost_usd + cost,
      };
      usage = addRole(usage, p.role, {
        prompt_tokens: tokens.prompt_tokens,
        completion_tokens: tokens.completion_tokens,
        cost_usd: cost,
      });
      return { ...state, usage, pendingCalls: rest };
    }
    default:
      return state;
  }
}

export const meterFromEvents = (events: readonly RuntimeEvent[], options: MeterOptions = {}): MeterState =>
  events.reduce((s, e) => meterEvolve(s, e, options), initialMeterState());

export interface BudgetExceeded {
  /** a task budget, or the session's (session-budget.ts) */
  budget: BudgetKey | 'session_max_tokens' | 'session_max_cost_usd';
  limit: number;
  actual: number;
  /** the role, for max_model_calls */
  role: Role | null;
  detail: string;
}

/** What the runtime is about to do; admission checks whether it still fits. */
export type NextAction = { kind: 'round' } | { kind: 'tool_call' } | { kind: 'model_call'; role: Role };

const exceeded = (
  budget: BudgetKey,
  limit: number,
  actual: number,
  detail: string,
  role: Role | null = null,
): BudgetExceeded => ({
  budget,
  limit,
  actual,
  role,
  detail,
});

/**
 * The first budget already overrun (used strictly more than allowed), in a
 * fixed order: time, tokens, cost, failures. Count budgets for rounds, tool
 * and model calls are enforced before the action by `admit`.
 */
export function firstExceeded(
  usage: TaskUsage,
  budgets: ResolvedBudgets,
  elapsedMs: number,
): BudgetExceeded | null {
  if (elapsedMs > budgets.timeout_ms)
    return exceeded(
      'timeout_ms',
      budgets.timeout_ms,
      elapsedMs,
      `task ran ${elapsedMs} ms, over its ${budgets.timeout_ms} ms time budget`,
    );
  const overspent = spendExceeded(usage, budgets);
  if (overspent) return overspent;
  if (usage.failures > budgets.max_failures)
    return exceeded(
      'max_failures',
      budgets.max_failures,
      usage.failures,
      `${usage.failures} failures, over the limit of ${budgets.max_failures}`,
    );
  return null;
}

/**
 * The token or cost budget already overrun. Model replies spend them, so they
 * are checked before each round and again before the tools a reply asked for.
 */
export function spendExceeded(usage: TaskUsage, budgets: ResolvedBudgets): BudgetExceeded | null {
  if (usage.total_tokens > budgets.max_tokens)
    return exceeded(
      'max_tokens',
      budgets.max_tokens,
      usage.total_tokens,
      `used ${usage.total_tokens} tokens, over the budget of ${budgets.max_tokens}`,
    );
  if (budgets.max_cost_usd !== null && usage.cost_usd > budgets.max_cost_usd)
    return exceeded(
      'max_cost_usd',
      budgets.max_cost_usd,
      usage.cost_usd,
      `cost $${usage.cost_usd.toFixed(6)}, over the budget of $${budgets.max_cost_usd}`,
    );
  return null;
}

/** Would the next action go over a count budget? Checked before the round / call starts. */
export function admit(usage: TaskUsage, budgets: ResolvedBudgets, next: NextAction): BudgetExceeded | null {
  switch (next.kind) {
    case 'round':
      return usage.rounds >= budgets.max_rounds
        ? exceeded(
            'max_rounds',
            budgets.max_rounds,
            usage.rounds,
            `all ${budgets.max_rounds} rounds used without an answer`,
          )
        : null;
    case 'tool_call':
      return usage.tool_calls >= budgets.max_tool_calls
        ? exceeded(
            'max_tool_calls',
            budgets.max_tool_calls,
            usage.tool_calls,
            `all ${budgets.max_tool_calls} tool calls used`,
          )
        : null;
    case 'model_call': {
      const used = usage.by_role[next.role]?.model_calls ?? 0;
      return used >= budgets.max_model_calls
        ? exceeded(
            'max_model_calls',
            budgets.max_model_calls,
            used,
            `the ${next.role} role used all ${budgets.max_model_calls} model calls`,
            next.role,
          )
        : null;
    }
  }
}
