import { z } from 'zod';
import {
  AgentProfile,
  DelegateArgs,
  ExecutionDirective,
  MAX_WAIT_MS,
  WaitForSignalArgs,
  ModelToolCall,
  PlanStep,
  PlanTodos,
  TodoCallArgs,
  TodoStatus,
  ToolManifest,
} from '@runledger/contracts';
import { agentLines } from '../delegation/agent-catalog';
import { TODO_FUNCTION } from '../discipline/todos';
import { parseDirective, wireSchema } from '../model/directive-parser';
import { ChatMessage, ToolFunction } from '../model/model-backend';
import { distinctCallIds } from '../model/tool-turns';

/** The runtime's own functions, offered beside the tools: what is not a tool call. */
export const PLAN_FUNCTION = 'runledger_plan';
export const FAIL_FUNCTION = 'runledger_fail';
export const DELEGATE_FUNCTION = 'runledger_delegate';
export const WAIT_FUNCTION = 'runledger_wait';
export const WAIT_FOR_SIGNAL_FUNCTION = 'runledger_wait_for_signal';

const PLAN_PARAMETERS = wireSchema(z.object({ steps: z.array(PlanStep).min(1).max(50) }));
const PLAN_WITH_TODOS_PARAMETERS = wireSchema(
  z.object({ steps: z.array(PlanStep).min(1).max(50), todos: PlanTodos.optional() }),
);
/** One flat object (a function's parameters must be one), checked against TodoCallArgs when called. */
const TODO_PARAMETERS = wireSchema(
  z.object({
    op: z.enum(['add', 'update']),
    id: z.string().min(1).max(64),
    text: z.string().min(1).max(2000).optional().describe('add: what is to be done'),
    required: z.boolean().optional().describe('add: must be done before the task is accepted (default true)'),
    status: TodoStatus.optional().describe('update: the new status'),
    note: z.string().min(1).max(2000).optional().describe('update: why (needed to cancel)'),
  }),
);
const FAIL_PARAMETERS = wireSchema(z.object({ reason: z.string().min(1) }));
const WAIT_PARAMETERS = wireSchema(
  z.object({
    duration_ms: z.number().int().nonnegative().max(MAX_WAIT_MS).optional(),
    until: z.string().datetime({ offset: true }).optional(),
  }),
);

const WAIT_FOR_SIGNAL_PARAMETERS = wireSchema(WaitForSignalArgs);

/** The runtime's durable waits, offered to an orchestrator beside its tools. */
export function timeFunctions(): ToolFunction[] {
  return [
    {
      name: WAIT_FUNCTION,
      description:
        'Wait, durably, before going on: for duration_ms milliseconds or until an ISO 8601 time (give one of them). The task sleeps without holding resources and survives restarts. Call it alone.',
      parameters: WAIT_PARAMETERS,
    },
    {
      name: WAIT_FOR_SIGNAL_FUNCTION,
      description:
        "Wait, durably, for a signal sent to this task by another system (POST /tasks/{id}/signals/{name}); a signal sent before the wait is taken at once. With timeout_ms the wait ends as timed out after that long. The result is the signal's payload. Call it alone.",
      parameters: WAIT_FOR_SIGNAL_PARAMETERS,
    },
  ];
}

/** the runtime functions whose call is a directive of its own (and must be the only call of its reply) */
const OWN_FUNCTIONS: Record<string, string> = {
  [PLAN_FUNCTION]: 'plan',
  [FAIL_FUNCTION]: 'fail',
  [WAIT_FUNCTION]: 'wait',
  [WAIT_FOR_SIGNAL_FUNCTION]: 'wait_for_signal',
};

/** the directive a runtime function of its own stands for */
const ownDirective = (name: string, args: Record<string, unknown>): Record<string, unknown> => ({
  type: OWN_FUNCTIONS[name],
  ...args,
});

/**
 * The tools a role may use, as functions (manifest name, description, args schema), then plan and
 * fail; with `todos` (todos are part of the task) the plan may declare todos and the todo function is offered.
 */
export function toolFunctions(
  tools: readonly ToolManifest[],
  opts: { todos?: boolean } = {},
): ToolFunction[] {
  return [
    ...tools.map((t) => ({ name: t.name, description: t.description, parameters: t.args_schema })),
    {
      name: PLAN_FUNCTION,
      description:
        'Run several steps, in dependency order (kinds: tool, coder with args.prompt, memory with args.op and args.text, respond with args.content, agent with args.agent and args.input); a step may use an earlier output as "${steps.<id>.output}". Call it alone.' +
        (opts.todos
          ? ' "todos" lists what the plan intends, each to be moved along with runledger_todo.'
          : ''),
      parameters: opts.todos ? PLAN_WITH_TODOS_PARAMETERS : PLAN_PARAMETERS,
    },
    {
      name: FAIL_FUNCTION,
      description: 'The task cannot be done: say why. Call it alone.',
      parameters: FAIL_PARAMETERS,
    },
    ...(opts.todos
      ? [
          {
            name: TODO_FUNCTION,
            description:
              "Add a todo to the task's list (op add: id, text, required) or move one along (op update: id, status pending|in_progress|done|cancelled, note; cancelled needs a note). Required todos must be done before the task is accepted.",
            parameters: TODO_PARAMETERS,
          },
        ]
      : []),
  ];
}

/**
 * The agents as one function: several calls in one reply run as children side by side. Nothing to
 * offer without agents.
 */
export function delegateFunction(agents: readonly AgentProfile[]): ToolFunction[] {
  if (agents.length === 0) return [];
  const schema = wireSchema(DelegateArgs) as { properties: Record<string, Record<string, unknown>> };
  const parameters = {
    ...schema,
    properties: { ...schema.properties, agent: { type: 'string', enum: agents.map((a) => a.name) } },
  };
  return [
    {
      name: DELEGATE_FUNCTION,
      description: `Hand a self-contained part of the task to an agent, which runs it as a task of its own and answers with its result (several calls in one reply run at the same time). Agents:\n${agentLines(agents)}`,
      parameters,
    },
  ];
}

/** Why a tool's arguments were refused, or null when they fit its schema. */
export type ArgsCheck = (tool: string, args: Record<string, unknown>) => string | null;

export type NativeReply =
  | { ok: true; directive: ExecutionDirective }
  | {
      ok: false;
      error: string;
      /** the correction turn's assistant calls: the reply's, each with an id of its own (see distinctCallIds) */
      calls: ModelToolCall[];
      /** the correction turn: one `tool` message per call, in order, each saying what was wrong with it (or that it was not run) */
      answers: ChatMessage[];
    };

export type CallCheck = { ok: true; args: Record<string, unknown> } | { ok: false; error: string };

/** a call's arguments as the object they must be */
export function argsOf(call: ModelToolCall): CallCheck {
  let value: unknown;
  try {
    value = call.arguments.trim() === '' ? {} : JSON.parse(call.arguments);
  } catch (e) {
    return { ok: false, error: `arguments are not valid JSON: ${(e as Error).message}` };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return { ok: false, error: 'arguments must be a JSON object' };
  return { ok: true, args: value as Record<string, unknown> };
}

const todoProblem = (args: Record<string, unknown>): string | null => {
  const parsed = TodoCallArgs.safeParse(args);
  return parsed.success
    ? null
    : parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
};

const delegateProblem = (args: Record<string, unknown>): string | null => {
  const parsed = DelegateArgs.safeParse(args);
  return parsed.success
    ? null
    : parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
};

const refuse = (calls: readonly ModelToolCall[], errors: Map<string, string>): NativeReply => ({
  ok: false,
  calls: [...calls],
  error: [...errors]
    .map(([id, e]) => `${calls.find((c) => c.id === id)?.name ?? id} (${id}): ${e}`)
    .join('; '),
  answers: calls.map((c) => ({
    role: 'tool',
    tool_call_id: c.id,
    content: errors.has(c.id)
      ? `error: ${errors.get(c.id)}. Call it again with corrected arguments.`
      : 'not run: another call of the same reply was invalid. Call it again with the corrected ones.',
  })),
});

/**
 * Calls that share an id cannot be told apart by their answers: none is run, and the correction
 * turn gives each an id of its own so that it can be sent at all.
 */
function sharedIdsRefused(calls: readonly ModelToolCall[]): NativeReply | null {
  const counts = new Map<string, number>();
  for (const c of calls) counts.set(c.id, (counts.get(c.id) ?? 0) + 1);
  const shared = [...counts].filter(([, n]) => n > 1);
  if (shared.length === 0) return null;
  const turn = distinctCallIds(calls);
  return {
    ok: false,
    error: shared
      .map(
        ([id, n]) =>
          `tool call id ${id} is given to ${n} calls of one reply; each call needs an id of its own`,
      )
      .join('; '),
    calls: turn,
    answers: turn.map((c, k) => ({
      role: 'tool',
      tool_call_id: c.id,
      content:
        (c.id === calls[k].id
          ? `not run: another call of your reply has the id ${c.id} too.`
          : `not run: this call had the id ${calls[k].id} of an earlier call of your reply (renamed ${c.id} here so that it can be answered).`) +
        ' Make the calls again, each with an id of its own.',
    })),
  };
}

/**
 * A reply's native tool calls -> one validated directive: one tool call is a
 * `tool` directive; several are a plan of independent steps (one per call, the
 * step id being the call id, each with its own permission check); plan and
 * fail are the runtime's own functions and stand alone. Anything invalid comes
 * back with the `tool` messages of a correction turn.
 */
export function directiveFromToolCalls(calls: readonly ModelToolCall[], check: ArgsCheck): NativeReply {
  const shared = sharedIdsRefused(calls);
  if (shared) return shared;
  const errors = new Map<string, string>();
  const parsed = calls.map((c) => ({ call: c, args: argsOf(c) }));
  for (const { call, args } of parsed) if (!args.ok) errors.set(call.id, args.error);
  const own = calls.filter((c) => Object.hasOwn(OWN_FUNCTIONS, c.name));
  if (own.length > 0 && calls.length > 1)
    for (const c of own) errors.set(c.id, `${c.name} must be the only call of its reply`);
  if (errors.size > 0) return refuse(calls, errors);

  if (own.length === 1) {
    const args = (parsed[0].args as { ok: true; args: Record<string, unknown> }).args;
    const directive = parseDirective(JSON.stringify(ownDirective(own[0].name, args)));
    if (!directive.ok) return refuse(calls, new Map([[own[0].id, directive.error]]));
    return { ok: true, directive: directive.directive };
  }
  for (const { call, args } of parsed) {
    const problem = !args.ok
      ? null
      : call.name === DELEGATE_FUNCTION
        ? delegateProblem(args.args)
        : call.name === TODO_FUNCTION
          ? todoProblem(args.args)
          : check(call.name, args.args);
    if (problem) errors.set(call.id, problem);
  }
  if (errors.size > 0) return refuse(calls, errors);
  const valid = parsed.map(({ call, args }) => ({
    call,
    args: (args as { ok: true; args: Record<string, unknown> }).args,
  }));
  if (valid.length === 1 && valid[0].call.name === DELEGATE_FUNCTION)
    return { ok: true, directive: { type: 'delegate', ...DelegateArgs.parse(valid[0].args) } };
  if (valid.length === 1)
    return { ok: true, directive: { type: 'tool', tool: valid[0].call.name, args: valid[0].args } };
  const directive = parseDirective(
    JSON.stringify({
      type: 'plan',
      steps: valid.map(({ call, args }) => ({
        id: call.id,
        ...(call.name === DELEGATE_FUNCTION
          ? { kind: 'agent', tool: null, args }
          : { kind: 'tool', tool: call.name, args }),
        depends_on: [],
      })),
    }),
  );
  if (!directive.ok) return refuse(calls, new Map(calls.map((c) => [c.id, directive.error])));
  return { ok: true, directive: directive.directive };
}

/**
 * A decided round as the model made it: its assistant message with the calls,
 * then one `tool` message per call with what came of it. `results` are the
 * round's result lines (see progress): a plan's lines name their step, which
 * is the call id; a lone call's lines are all its own; lines of no step (notes)
 * go with the last call.
 */
export function toolTurn(calls: readonly ModelToolCall[], results: readonly string[]): ChatMessage[] {
  const lines = new Map<string, string[]>(calls.map((c) => [c.id, []]));
  for (const line of results) {
    const own = calls.length > 1 ? calls.find((c) => line.startsWith(`step ${c.id} `)) : undefined;
    lines.get((own ?? calls[calls.length - 1]).id)!.push(line);
  }
  return [
    { role: 'assistant', content: '', tool_calls: [...calls] },
    ...calls.map((c): ChatMessage => ({
      role: 'tool',
      tool_call_id: c.id,
      content: lines.get(c.id)!.join('\n') || 'no result yet',
    })),
  ];
}
