import { z } from 'zod';
import { AcceptCheck, TaskBudgets, TodoSpec, TodoStatus } from './task';

export const STEP_KINDS = ['tool', 'coder', 'memory', 'respond', 'agent', 'wait', 'wait_for_signal'] as const;

const JsonArgs = z.record(z.string(), z.unknown());

/** An agent profile's name: what a delegation names, as a function argument and in config. */
export const AgentName = z
  .string()
  .regex(/^[a-z][a-z0-9_-]{0,63}$/, 'lowercase letters, digits, - and _, starting with a letter (max 64)');

/** What a delegation asks of a child task: the agent that runs it, its input, and what bounds and checks it. */
export const DelegateArgs = z
  .object({
    agent: AgentName,
    input: z.string().min(1).max(100_000),
    budgets: TaskBudgets.optional(),
    accept_checks: z.array(AcceptCheck).max(50).optional(),
  })
  .strict();
export type DelegateArgs = z.infer<typeof DelegateArgs>;

/** the longest a wait may last: what a Node timer can hold, about 24.8 days */
export const MAX_WAIT_MS = 2_147_483_647;

/** How long a durable timer waits: a duration from when it is set, or a point in time. */
export const WaitArgs = z.union([
  z.object({ duration_ms: z.number().int().nonnegative().max(MAX_WAIT_MS) }).strict(),
  z.object({ until: z.string().datetime({ offset: true }) }).strict(),
]);
export type WaitArgs = z.infer<typeof WaitArgs>;

/** A signal's name: what `POST /tasks/:id/signals/:name` and a wait_for_signal name. */
export const SignalName = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$/,
    'letters, digits, . _ : and -, starting with a letter or digit (max 100)',
  );

/** What a wait for a signal waits for: the signal's name, and how long at most (absent: for as long as it takes). */
export const WaitForSignalArgs = z
  .object({ name: SignalName, timeout_ms: z.number().int().positive().max(MAX_WAIT_MS).optional() })
  .strict();
export type WaitForSignalArgs = z.infer<typeof WaitForSignalArgs>;

/** The args a step kind is checked against when its plan is parsed (the others' args are the tool's business). */
const STEP_ARGS: Partial<Record<(typeof STEP_KINDS)[number], z.ZodType>> = {
  agent: DelegateArgs,
  wait: WaitArgs,
  wait_for_signal: WaitForSignalArgs,
};

export const PlanStep = z
  .object({
    id: z.string().min(1).max(100),
    kind: z.enum(STEP_KINDS),
    tool: z.string().min(1).max(200).nullable().default(null),
    args: JsonArgs.default({}),
    description: z.string().max(2000).default(''),
    requires_confirmation: z.boolean().default(false),
    depends_on: z.array(z.string().min(1).max(100)).default([]),
  })
  .strict()
  // An agent or wait step's args are checked when the plan is parsed, so a bad one gets a correction turn.
  .superRefine((step, ctx) => {
    const schema = STEP_ARGS[step.kind];
    if (!schema) return;
    const args = schema.safeParse(step.args);
    if (!args.success)
      for (const issue of args.error.issues)
        ctx.addIssue({ code: 'custom', path: ['args', ...issue.path], message: issue.message });
  });
export type PlanStep = z.infer<typeof PlanStep>;

/** A plan's todos: what the plan intends, each moved along by the model; required ones gate acceptance. */
export const PlanTodos = z
  .array(TodoSpec)
  .max(50)
  .superRefine((todos, ctx) => {
    const seen = new Set<string>();
    for (const [i, t] of todos.entries()) {
      if (seen.has(t.id))
        ctx.addIssue({ code: 'custom', path: [i, 'id'], message: `duplicate todo id ${t.id}` });
      seen.add(t.id);
    }
  });

export const PlanDirective = z
  .object({ type: z.literal('plan'), steps: z.array(PlanStep).min(1).max(50), todos: PlanTodos.optional() })
  .strict();

/** The runtime's todo tool: the JSON protocol's `todo_update` and, with `op`, native calling's `runledger_todo`. */
export const TodoUpdateArgs = z
  .object({ id: z.string().min(1).max(64), status: TodoStatus, note: z.string().min(1).max(2000).optional() })
  .strict();
export type TodoUpdateArgs = z.infer<typeof TodoUpdateArgs>;
export const TodoCallArgs = z.discriminatedUnion('op', [
  z.object({ op: z.literal('add'), ...TodoSpec.shape }).strict(),
  z.object({ op: z.literal('update'), ...TodoUpdateArgs.shape }).strict(),
]);
export type TodoCallArgs = z.infer<typeof TodoCallArgs>;
export const ToolDirective = z
  .object({ type: z.literal('tool'), tool: z.string().min(1).max(200), args: JsonArgs.default({}) })
  .strict();
export const RespondDirective = z.object({ type: z.literal('respond'), content: z.string() }).strict();
export const FailDirective = z.object({ type: z.literal('fail'), reason: z.string().min(1) }).strict();
/** Hand the work to a named agent: a child task with its own stream, whose result is this round's outcome. */
export const DelegateDirective = z.object({ type: z.literal('delegate'), ...DelegateArgs.shape }).strict();

/** Wait, durably, for a time: the task holds no lease and no run slot meanwhile. */
export const WaitDirective = z
  .object({
    type: z.literal('wait'),
    duration_ms: z.number().int().nonnegative().max(MAX_WAIT_MS).optional(),
    until: z.string().datetime({ offset: true }).optional(),
  })
  .strict()
  .refine((d) => (d.duration_ms === undefined) !== (d.until === undefined), {
    message: 'a wait needs exactly one of duration_ms and until',
  });

/** Wait, durably, for a signal sent to the task (one that came before the wait is taken first). */
export const WaitForSignalDirective = z
  .object({ type: z.literal('wait_for_signal'), ...WaitForSignalArgs.shape })
  .strict();

export const ExecutionDirective = z.discriminatedUnion('type', [
  PlanDirective,
  ToolDirective,
  RespondDirective,
  FailDirective,
  DelegateDirective,
  WaitDirective,
  WaitForSignalDirective,
]);
export type ExecutionDirective = z.infer<typeof ExecutionDirective>;
export type PlanDirective = z.infer<typeof PlanDirective>;
export type ToolDirective = z.infer<typeof ToolDirective>;
export type DelegateDirective = z.infer<typeof DelegateDirective>;
export type WaitDirective = z.infer<typeof WaitDirective>;
export type WaitForSignalDirective = z.infer<typeof WaitForSignalDirective>;

/**
 * One native tool call as the model sent it (OpenAI `tool_calls`): the id the
 * `tool` message answers, the function name and its arguments exactly as the
 * model wrote them (a JSON string, possibly invalid), so replay reproduces them.
 */
export const ModelToolCall = z
  .object({ id: z.string().min(1).max(200), name: z.string().min(1).max(200), arguments: z.string() })
  .strict();
export type ModelToolCall = z.infer<typeof ModelToolCall>;
