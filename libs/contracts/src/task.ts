import { z } from 'zod';
import { ToolBudget } from './tool';

export const TASK_STATUSES = [
  'queued',
  'running',
  'awaiting_permission',
  'awaiting_secret',
  'awaiting_client_tool',
  'waiting',
  'completed',
  'failed',
  'cancelled',
] as const;
export const TaskStatus = z.enum(TASK_STATUSES);
export type TaskStatus = z.infer<typeof TaskStatus>;
export const TERMINAL_STATUSES: readonly TaskStatus[] = ['completed', 'failed', 'cancelled'];
export const isTerminalStatus = (s: TaskStatus): boolean => TERMINAL_STATUSES.includes(s);

export const STOP_REASONS = [
  'completed',
  'accept_check_failed',
  'validation_error',
  'provider_error',
  'authentication_error',
  'rate_limited',
  'timeout',
  'tool_error',
  'permission_denied',
  'budget_exceeded',
  'repeat_cycle',
  'missing_completion_signal',
  'model_gave_up',
  'mutation_refused',
  'remote_unavailable',
  'not_understood',
  'cancelled',
  'interrupted',
] as const;
export const StopReason = z.enum(STOP_REASONS);
export type StopReason = z.infer<typeof StopReason>;

export const Budgets = z
  .object({
    max_rounds: z.number().int().positive(),
    max_tool_calls: z.number().int().nonnegative(),
    max_model_calls: z.number().int().nonnegative(),
    max_failures: z.number().int().nonnegative(),
    max_tokens: z.number().int().positive(),
    max_cost_usd: z.number().nonnegative(),
    timeout_ms: z.number().int().positive(),
    /** the session's token budget across its tasks: set by the first task of the session that names it */
    session_max_tokens: z.number().int().positive(),
    /** the session's cost budget across its tasks, as session_max_tokens */
    session_max_cost_usd: z.number().nonnegative(),
  })
  .partial()
  .strict();
export type Budgets = z.infer<typeof Budgets>;

/** The budgets of one task alone: what a delegation may give its child (the session's are the session's). */
export const TaskBudgets = Budgets.omit({ session_max_tokens: true, session_max_cost_usd: true });
export type TaskBudgets = z.infer<typeof TaskBudgets>;

/**
 * The session budget a task runs under, recorded in its TASK_RECEIVED as it stood then, so a
 * resume or a replay never reads the session again: the limits, what the session's earlier tasks
 * had spent, and where the limits came from (`task`: a task's budgets.session_max_*, `set_by`
 * that task; `setting`: the session's own setting, PUT /sessions/:id/budget).
 */
export const SessionBudget = z.object({
  max_tokens: z.number().int().positive().nullable(),
  max_cost_usd: z.number().nonnegative().nullable(),
  used_tokens: z.number().int().nonnegative(),
  used_cost_usd: z.number().nonnegative(),
  source: z.enum(['task', 'setting']),
  set_by: z.string().min(1).max(200).nullable(),
  /** the earlier tasks of the session whose spend is in used_* (a delegated child's is in its parent's) */
  tasks_counted: z.number().int().nonnegative(),
});
export type SessionBudget = z.infer<typeof SessionBudget>;

/** A session's own budget as it is set (PUT /sessions/:id/budget): at least one limit; one left out is no limit. */
export const SessionBudgetSetting = z
  .object({
    max_tokens: z.number().int().positive().optional(),
    max_cost_usd: z.number().nonnegative().optional(),
  })
  .strict()
  .refine((s) => s.max_tokens !== undefined || s.max_cost_usd !== undefined, {
    message: 'name max_tokens, max_cost_usd or both',
  });
export type SessionBudgetSetting = z.infer<typeof SessionBudgetSetting>;

export const ACCEPT_CHECK_KINDS = [
  'output_only',
  'workspace_change',
  'command_success',
  'file_exists',
  'content_contains',
  'tool_fact',
  'todos_done',
] as const;
export const AcceptCheck = z
  .object({
    id: z.string().min(1).max(200),
    kind: z.enum(ACCEPT_CHECK_KINDS),
    target: z.string().max(4096).default(''),
    match: z.string().max(4096).nullable().default(null),
    required: z.boolean().default(true),
    params: z.record(z.string(), z.unknown()).default({}),
  })
  .strict();
export type AcceptCheck = z.infer<typeof AcceptCheck>;

/** A todo as a plan declares it or the model adds it: `required` (default) todos gate acceptance. */
export const TodoSpec = z
  .object({
    id: z
      .string()
      .regex(
        /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/,
        'letters, digits, _ . and -, starting with a letter or digit (max 64)',
      ),
    text: z.string().min(1).max(2000),
    required: z.boolean().default(true),
  })
  .strict();
export type TodoSpec = z.infer<typeof TodoSpec>;

export const TODO_STATUSES = ['pending', 'in_progress', 'done', 'cancelled'] as const;
export const TodoStatus = z.enum(TODO_STATUSES);
export type TodoStatus = z.infer<typeof TodoStatus>;
/** A todo in one of these needs nothing more: cancelled ones carry the note that says why. */
export const isTerminalTodoStatus = (s: TodoStatus): boolean => s === 'done' || s === 'cancelled';

/** Who a todo belongs to: the plan that declared it, or the round whose tool call added it. */
export const TodoOwner = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('plan'), plan_id: z.string().min(1).max(200) }).strict(),
  z.object({ kind: z.literal('round'), round: z.number().int().nonnegative() }).strict(),
]);
export type TodoOwner = z.infer<typeof TodoOwner>;

/** A todo as the task's state shows it. */
export const TodoItem = z.object({
  id: z.string(),
  text: z.string(),
  required: z.boolean(),
  status: TodoStatus,
  note: z.string().nullable(),
  owner: TodoOwner,
  /** counts toward acceptance: owned by the current plan, or added after it started (see docs/todos.md) */
  active: z.boolean(),
});
export type TodoItem = z.infer<typeof TodoItem>;

/**
 * What happens to a message (a new task) that arrives for a session while a task of the session is
 * unfinished (running, queued or waiting): `enqueue` runs it once that task ended; `reject` refuses it
 * (409 naming the task); `interrupt` stops that task at its next safe point (stop reason
 * `interrupted`) and runs the new one after it, with it in its history; `rollback` cancels that task
 * and leaves it out of the session's history, then runs the new one.
 */
export const ON_BUSY_STRATEGIES = ['enqueue', 'reject', 'interrupt', 'rollback'] as const;
export const OnBusy = z.enum(ON_BUSY_STRATEGIES);
export type OnBusy = z.infer<typeof OnBusy>;
/** the strategy of a session that set none */
export const DEFAULT_ON_BUSY: OnBusy = 'enqueue';

export const SCHEDULE_OVERLAPS = ['skip', 'buffer_one', 'allow'] as const;
export const SCHEDULE_CATCH_UPS = ['skip', 'run_once'] as const;

/**
 * A schedule as created (`POST /schedules`): a cron expression (5 fields, or 6 with seconds first) in a
 * time zone; each slot submits a task from `input` (`{{slot}}`, `{{date}}`, `{{time}}` and
 * `{{schedule_id}}` filled in), with the agent's budgets and session. `overlap`: what a slot does while
 * the schedule's previous task is unfinished; `catch_up`: what the slots that passed while no instance
 * ran come to (see docs/time.md).
 */
export const ScheduleSpec = z
  .object({
    name: z.string().min(1).max(200).optional(),
    cron: z.string().min(9).max(200),
    time_zone: z.string().min(1).max(100).default('UTC'),
    input: z.string().min(1).max(100_000),
    session_id: z.string().min(1).max(200).optional(),
    budgets: z.lazy(() => Budgets).optional(),
    overlap: z.enum(SCHEDULE_OVERLAPS).default('skip'),
    catch_up: z.enum(SCHEDULE_CATCH_UPS).default('skip'),
  })
  .strict();
export type ScheduleSpec = z.infer<typeof ScheduleSpec>;

/** What a user submits (REST body or CLI). */
export const UserTask = z
  .object({
    input: z.string().min(1).max(100_000),
    session_id: z.string().min(1).max(200).optional(),
    accept_checks: z.array(AcceptCheck).max(50).optional(),
    budgets: Budgets.optional(),
    /** whether time spent in a `wait` counts against budgets.timeout_ms (absent: it does not) */
    timeout_includes_waits: z.boolean().optional(),
    /** a person allows this task to change things whatever its input says (round policy; recorded as the decision) */
    allow_mutation: z.boolean().optional(),
    /** for this message, instead of the session's strategy, when a task of the session is unfinished */
    on_busy: OnBusy.optional(),
  })
  .strict();
export type UserTask = z.infer<typeof UserTask>;

/** What a round may do, decided by the runtime before the round (round policy; see docs/round-policy.md). */
export const TOOL_SURFACES = ['retrieval', 'inspection', 'mutation', 'answer_only'] as const;
export const ToolSurface = z.enum(TOOL_SURFACES);
export type ToolSurface = z.infer<typeof ToolSurface>;

/** Whether a task may change things, and who or what decided it. */
export const MutationIntent = z.object({
  allowed: z.boolean(),
  reason: z.string(),
  decided_by: z.enum(['classifier', 'person']),
});
export type MutationIntent = z.infer<typeof MutationIntent>;

/**
 * An earlier task of the task's session, as its context shows it: what was asked and what came of
 * it. Recorded in TASK_RECEIVED when the task is received, so the conversation a task saw is in its
 * own log (a replay or fork reads it there, never from the other tasks).
 */
export const SessionTurn = z.object({
  task_id: z.string().min(1).max(200),
  input: z.string(),
  /** the task's final result (null when it ended without one) */
  answer: z.string().nullable(),
  stop_reason: StopReason,
});
export type SessionTurn = z.infer<typeof SessionTurn>;

export const ROLES = ['orchestrator', 'coder', 'critic', 'utility'] as const;
export const Role = z.enum(ROLES);
export type Role = z.infer<typeof Role>;

export const TokenUsage = z.object({
  prompt_tokens: z.number().int().nonnegative(),
  completion_tokens: z.number().int().nonnegative(),
  total_tokens: z.number().int().nonnegative(),
  /** true when the provider reported no usage and the numbers were estimated from characters */
  estimated: z.boolean().default(false),
});
export type TokenUsage = z.infer<typeof TokenUsage>;

/**
 * How a Responses API call stood to the server's stored conversation (RUNLEDGER_MODEL_API=responses).
 * The anchor of the next call is this call's `response_id` with `items_hash` / `item_count`: the
 * items the response saw, its own output included. `previous_response_id` set: only the items after
 * the anchor were sent; null: the whole conversation was, for `stateless_reason`.
 */
export const CONTINUATION_STATELESS_REASONS = ['missing', 'stale', 'refused'] as const;
export const ModelContinuation = z.object({
  response_id: z.string().nullable(),
  items_hash: z.string(),
  item_count: z.number().int().nonnegative(),
  previous_response_id: z.string().nullable(),
  sent_items: z.number().int().nonnegative(),
  /** missing: no earlier response to continue (or it had no id); stale: the conversation no longer extends it; refused: the server refused the id */
  stateless_reason: z.enum(CONTINUATION_STATELESS_REASONS).nullable(),
  detail: z.string().nullable(),
});
export type ModelContinuation = z.infer<typeof ModelContinuation>;

/**
 * The answer evaluator (off unless set, per agent profile or for the orchestrator's own tasks): the
 * critic role's model scores a task's final answer before it ends; below `threshold` the model answers
 * once more with the evaluation as feedback. `max_tokens` is the evaluator's own budget in a task:
 * once its calls have used that many tokens, answers are no longer evaluated.
 */
export const AnswerEvaluatorSettings = z
  .object({
    threshold: z.number().min(0).max(1).default(0.7),
    max_tokens: z.number().int().positive().max(10_000_000).default(8000),
    /** what a good answer must do, besides answering the task (shown to the evaluator) */
    criteria: z.string().max(4000).default(''),
    timeout_ms: z.number().int().positive().max(600_000).default(30_000),
  })
  .strict();
export type AnswerEvaluatorSettings = z.infer<typeof AnswerEvaluatorSettings>;

/** The evaluator's reply: how well the answer does the task (0..1), and what it lacks. */
export const AnswerScore = z.object({
  score: z.number().min(0).max(1),
  feedback: z.string().max(4000),
});
export type AnswerScore = z.infer<typeof AnswerScore>;

/** Usage summed over a task, on the task state and on every final event. */
export const TaskUsage = z.object({
  rounds: z.number().int().nonnegative(),
  tool_calls: z.number().int().nonnegative(),
  model_calls: z.number().int().nonnegative(),
  failures: z.number().int().nonnegative(),
  prompt_tokens: z.number().int().nonnegative(),
  completion_tokens: z.number().int().nonnegative(),
  total_tokens: z.number().int().nonnegative(),
  cost_usd: z.number().nonnegative(),
  by_role: z.record(
    z.string(),
    z.object({
      model_calls: z.number().int().nonnegative(),
      prompt_tokens: z.number().int().nonnegative(),
      completion_tokens: z.number().int().nonnegative(),
      cost_usd: z.number().nonnegative(),
    }),
  ),
});
export type TaskUsage = z.infer<typeof TaskUsage>;

export const emptyUsage = (): TaskUsage => ({
  rounds: 0,
  tool_calls: 0,
  model_calls: 0,
  failures: 0,
  prompt_tokens: 0,
  completion_tokens: 0,
  total_tokens: 0,
  cost_usd: 0,
  by_role: {},
});

export type RoleUsage = TaskUsage['by_role'][string];

/** `usage.by_role` with `patch` added to one role's counters (a new object; `usage` is not touched). */
export const addRoleUsage = (
  usage: TaskUsage,
  role: string,
  patch: Partial<RoleUsage>,
): TaskUsage['by_role'] => {
  const prev = usage.by_role[role] ?? { model_calls: 0, prompt_tokens: 0, completion_tokens: 0, cost_usd: 0 };
  return {
    ...usage.by_role,
    [role]: {
      model_calls: prev.model_calls + (patch.model_calls ?? 0),
      prompt_tokens: prev.prompt_tokens + (patch.prompt_tokens ?? 0),
      completion_tokens: prev.completion_tokens + (patch.completion_tokens ?? 0),
      cost_usd: prev.cost_usd + (patch.cost_usd ?? 0),
    },
  };
};

/**
 * A child task's usage rolled up into its parent's: its calls, tokens and cost
 * count against the parent's budgets; its rounds and failures stay its own.
 */
export const addChildUsage = (usage: TaskUsage, child: TaskUsage): TaskUsage => {
  let by_role = usage.by_role;
  for (const [role, u] of Object.entries(child.by_role))
    by_role = addRoleUsage({ ...usage, by_role }, role, u);
  return {
    ...usage,
    tool_calls: usage.tool_calls + child.tool_calls,
    model_calls: usage.model_calls + child.model_calls,
    prompt_tokens: usage.prompt_tokens + child.prompt_tokens,
    completion_tokens: usage.completion_tokens + child.completion_tokens,
    total_tokens: usage.total_tokens + child.total_tokens,
    cost_usd: usage.cost_usd + child.cost_usd,
    by_role,
  };
};

/** USD per million tokens for one model; a price table keys these by model name, `*` for any other. */
export const ModelPrice = z
  .object({ input_per_mtok: z.number().nonnegative(), output_per_mtok: z.number().nonnegative() })
  .strict();
export type ModelPrice = z.infer<typeof ModelPrice>;
export const PriceTable = z.record(z.string().min(1), ModelPrice);
export type PriceTable = z.infer<typeof PriceTable>;

const Count = z.number().int().nonnegative();
const Millis = z.number().int().nonnegative();

/**
 * The settings that shaped a run, recorded in its TASK_RECEIVED so a replay runs under them and not
 * under the environment of the day: the task's budgets as resolved, the price table, the retry policy,
 * the guards' thresholds, the prompt budget and the round cap. `discipline` is null when the run had
 * no run discipline (no budgets, retries or guards).
 */
export const RunSettings = z.object({
  max_rounds: z.number().int().positive(),
  /** how the orchestrator was spoken to: native tool calls or a JSON directive in the text (absent in older runs) */
  model_protocol: z.enum(['tools', 'json']).optional(),
  /** how many tool-call replies a coder step may make before it must answer in text (absent in older runs: 8) */
  coder_tool_turns: z.number().int().positive().optional(),
  /** todos offered from the first round, and a build request reminded to create its own (absent in older runs: off) */
  todos: z.enum(['on', 'off']).optional(),
  /** time spent in a `wait` counts against the time budget (absent: it does not) */
  timeout_includes_waits: z.literal(true).optional(),
  /** the runtime decides each round's tool surface and refuses what it did not offer (absent in older runs: off) */
  round_policy: z.enum(['on', 'off']).optional(),
  /** the tools' per-tool budgets from their manifests when the task was received, by tool name (absent: none declared) */
  tool_budgets: z.record(z.string(), ToolBudget).optional(),
  /** the orchestrator's own tasks have their final answer evaluated (absent: off; a delegated agent's profile says its own) */
  answer_evaluator: AnswerEvaluatorSettings.optional(),
  discipline: z
    .object({
      budgets: z.object({
        max_rounds: z.number().int().positive(),
        max_tool_calls: Count,
        max_model_calls: Count,
        max_failures: Count,
        max_tokens: z.number().int().positive(),
        max_cost_usd: z.number().nonnegative().nullable(),
        timeout_ms: z.number().int().positive(),
      }),
      prices: PriceTable,
      chars_per_token: z.number().positive(),
      retry: z.object({
        model_retries: Count,
        tool_retries: Count,
        base_delay_ms: Millis,
        max_delay_ms: Millis,
        max_retry_after_ms: Millis,
      }),
      guards: z.object({
        completion_max_misses: Count,
        repeat_threshold: Count,
        circuit_breaker_threshold: Count,
        tool_timeout_backoff_factor: z.number().positive(),
        tool_timeout_cap_ms: Millis,
        model_timeout_ms: Millis,
        stream_idle_timeout_ms: Millis,
      }),
      prompt: z.object({
        context_window_tokens: z.number().int().positive(),
        max_tokens: Count,
        safety_margin: z.number().nonnegative(),
        memory_share: z.number().nonnegative(),
        keep_recent_history: Count,
        max_trim_items: Count,
        summary_tokens: Count,
        /** absent in runs recorded before tool outputs were elided to a share of the history */
        tool_output_share: z.number().positive().max(1).optional(),
      }),
    })
    .nullable(),
});
export type RunSettings = z.infer<typeof RunSettings>;

/**
 * What an AG-UI frontend sent with the run that started a task (POST /ag-ui), recorded in its
 * TASK_RECEIVED as it came: the thread and run it belongs to, the ambient `context`, the
 * `forwarded_props` passed through untouched, and the tools the frontend offered (they run in the
 * browser). Absent for tasks submitted any other way.
 */
export const AgUiRun = z.object({
  thread_id: z.string().min(1).max(200),
  run_id: z.string().min(1).max(200),
  context: z.array(z.object({ description: z.string(), value: z.string() })).default([]),
  forwarded_props: z.unknown().optional(),
  tools: z
    .array(z.object({ name: z.string().min(1), description: z.string(), parameters: z.unknown().optional() }))
    .default([]),
  /** the user message the task runs, as sent (its id and content): the thread's messages show it so */
  user_message: z
    .object({ id: z.string().min(1).max(200), content: z.unknown(), name: z.string().optional() })
    .optional(),
});
export type AgUiRun = z.infer<typeof AgUiRun>;

/** A tool the client offered: it runs there, and the task waits for its result (TASK_AWAITING_CLIENT_TOOL). */
export type ClientTool = AgUiRun['tools'][number];

/** A client tool's name as a model function may be named; the runtime's own functions start with `runledger_`. */
export const CLIENT_TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;
