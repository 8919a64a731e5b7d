import { Budgets, EventPayload, SessionBudget, ValidationError } from '@runledger/contracts';
import type { SessionTask } from '../log/task-views';

/** What a task of the session recorded when it was received, as far as the session budget goes. */
export type ReceivedForBudget = Pick<EventPayload<'TASK_RECEIVED'>, 'session_budget' | 'parent_task_id'>;

/** The session's own limits (its setting), with the task that set them when a task did. */
export interface SessionLimits {
  max_tokens: number | null;
  max_cost_usd: number | null;
  source: SessionBudget['source'];
  set_by: string | null;
}

export interface SessionBudgetInput {
  task_id: string;
  /** the budgets the new task asked for: its session_max_* set the session's limits when none are set yet */
  asked: Budgets;
  /** the session's latest tasks, oldest first (delegated children among them) */
  earlier: readonly SessionTask[];
  /** the first event of an earlier task, read only as far as needed (newest first) */
  received: (taskId: string) => Promise<ReceivedForBudget | null>;
  /** the session's own setting, which comes before any task's (null: none) */
  setting?: SessionLimits | null;
}

const limitsOf = (b: SessionBudget): SessionLimits => ({
  max_tokens: b.max_tokens,
  max_cost_usd: b.max_cost_usd,
  source: b.source,
  set_by: b.set_by,
});

/**
 * The session budget a new task runs under, to record in its TASK_RECEIVED; null when the session
 * has none. Its limits: the session's setting, else the limits the session's latest earlier task
 * ran under, else the new task's own `session_max_*` (the first task that names them sets them).
 * A task naming other limits than the session's is refused (ValidationError): a later task cannot
 * raise or lower them. Its spend: what the session's tasks have spent (delegated children are in
 * their parents'), counted from the oldest task read that recorded a session budget, whose own
 * record carries the spend of the tasks before it.
 */
export async function sessionBudgetFor(input: SessionBudgetInput): Promise<SessionBudget | null> {
  const { asked } = input;
  const names = asked.session_max_tokens !== undefined || asked.session_max_cost_usd !== undefined;
  // newest first: the session's tasks that a person (or a protocol) submitted, with what they recorded
  const roots: Array<{ task: SessionTask; received: ReceivedForBudget }> = [];
  for (let i = input.earlier.length - 1; i >= 0; i--) {
    const task = input.earlier[i];
    const received = await input.received(task.task_id);
    if (!received || received.parent_task_id !== undefined) continue;
    // a session whose latest task ran under no budget has none, unless this task or a setting sets one
    if (roots.length === 0 && !received.session_budget && !names && !input.setting) return null;
    roots.push({ task, received });
  }
  const inherited = roots.find((r) => r.received.session_budget)?.received.session_budget;
  const set: SessionLimits | null = input.setting ?? (inherited ? limitsOf(inherited) : null);
  if (set && names) {
    const differs =
      (asked.session_max_tokens ?? set.max_tokens) !== set.max_tokens ||
      (asked.session_max_cost_usd ?? set.max_cost_usd) !== set.max_cost_usd;
    if (differs)
      throw new ValidationError(
        `the session's budget is already set (session_max_tokens ${set.max_tokens ?? 'none'}, ` +
          `session_max_cost_usd ${set.max_cost_usd ?? 'none'}, ${set.source === 'setting' ? "the session's setting" : `by task ${set.set_by}`}); a later task cannot change it`,
        { field: 'budgets', session_budget: set },
      );
  }
  const limits: SessionLimits | null =
    set ??
    (names
      ? {
          max_tokens: asked.session_max_tokens ?? null,
          max_cost_usd: asked.session_max_cost_usd ?? null,
          source: 'task',
          set_by: input.task_id,
        }
      : null);
  if (!limits) return null;
  // oldest first from the oldest task that recorded the session's spend before it
  const chronological = [...roots].reverse();
  const from = chronological.findIndex((r) => r.received.session_budget);
  const base = from === -1 ? null : chronological[from].received.session_budget!;
  const counted = from === -1 ? chronological : chronological.slice(from);
  return {
    ...limits,
    used_tokens: (base?.used_tokens ?? 0) + counted.reduce((n, r) => n + r.task.usage.total_tokens, 0),
    used_cost_usd: (base?.used_cost_usd ?? 0) + counted.reduce((n, r) => n + r.task.usage.cost_usd, 0),
    tasks_counted: (base?.tasks_counted ?? 0) + counted.length,
  };
}

/**
 * The session budget of a queued task when its turn begins: recomputed from the session's tasks
 * received before it, as they stand now (what the tasks it waited for spent included). The limits
 * it named itself apply when the session's still allow them; otherwise the session's own.
 */
export async function sessionBudgetAtTurn(input: SessionBudgetInput): Promise<SessionBudget | null> {
  const at = input.earlier.findIndex((t) => t.task_id === input.task_id);
  const before = { ...input, earlier: at === -1 ? input.earlier : input.earlier.slice(0, at) };
  const { session_max_tokens, session_max_cost_usd } = input.asked;
  const own: Budgets = {
    ...(session_max_tokens !== undefined ? { session_max_tokens } : {}),
    ...(session_max_cost_usd !== undefined ? { session_max_cost_usd } : {}),
  };
  try {
    return await sessionBudgetFor({ ...before, asked: own });
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    return sessionBudgetFor({ ...before, asked: {} });
  }
}
