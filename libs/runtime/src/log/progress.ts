import {
  AcceptCheck,
  AgentProfile,
  Budgets,
  ClientTool,
  EventPayload,
  ExecutionDirective,
  MutationIntent,
  PermissionDecision,
  PlanStep,
  Role,
  RunSettings,
  RuntimeEvent,
  SessionBudget,
  StopReason,
  TaskStatus,
  TaskUsage,
  ToolResult,
  emptyUsage,
} from '@runledger/contracts';
import { StepStatus } from '@runledger/scheduler';
import { ContinuationAnchor, HistoryItem } from '../model/model-backend';
import { MeterState, initialMeterState, meterEvolve } from '../discipline/budgets';
import { COMPACTED_ROUNDS } from '../discipline/prompt-budget';
import { isSessionItem, sessionHistoryItems } from './session-history';
import { TodoState, initialTodoState, todoEvolve } from '../discipline/todos';

export interface CallProgress {
  call_id: string;
  tool: string;
  args: Record<string, unknown>;
  args_hash: string;
  step_id: string | null;
  attempt: number;
  /** null: intent recorded, no outcome */
  outcome: 'completed' | 'failed' | null;
  result: ToolResult | null;
  error: string | null;
  error_kind: EventPayload<'TOOL_FAILED'>['error_kind'] | null;
  /** its server asked the user for input during the latest attempt, which stopped for it (see ToolInputRequired) */
  awaiting_input?: true;
}

export interface PlanProgress {
  plan_id: string;
  round: number;
  steps: PlanStep[];
  status: Map<string, StepStatus>;
  outputs: Map<string, unknown>;
  errors: Map<string, string>;
  /** null while it runs */
  outcome: 'completed' | 'failed' | null;
}

/** A delegation of this task: the child it started, and how the child ended (null while it runs). */
export interface ChildProgress {
  started: EventPayload<'CHILD_TASK_STARTED'>;
  ended: EventPayload<'CHILD_TASK_ENDED'> | null;
  /** a remote agent's task as last recorded (null: local child, or not heard of yet) */
  remote: EventPayload<'REMOTE_TASK_UPDATED'> | null;
}

/** A durable timer of the task: as set, and whether it fired. */
export interface TimerProgress {
  set: EventPayload<'TIMER_SET'>;
  fired: boolean;
}

/** A signal sent to the task: kept, in the order received, until a wait takes it. */
export interface SignalProgress {
  received: EventPayload<'SIGNAL_RECEIVED'>;
  /** the wait that took it; null while it is kept */
  taken_by: string | null;
}

/** A wait for a signal: as started, and how it ended (null while it waits). */
export interface SignalWaitProgress {
  awaited: EventPayload<'SIGNAL_AWAITED'>;
  outcome: { kind: 'signal'; signal_id: string } | { kind: 'timeout' } | null;
}

export type PendingPermission = EventPayload<'TASK_AWAITING_PERMISSION'>;
export type PendingSecret = EventPayload<'TASK_AWAITING_SECRET'>;
export type PendingClientTool = EventPayload<'TASK_AWAITING_CLIENT_TOOL'>;

/**
 * Where a task's run stands, folded from its events alone: everything the loop needs
 * to decide its next action, before or after a restart. The run part of the task fold
 * (TaskFold), which also keeps the task's public state.
 */
export interface TaskProgress {
  task_id: string;
  session_id: string;
  input: string;
  budgets: Budgets;
  /** the session's budget across its tasks as it stood when the task was received (null: none) */
  session_budget: SessionBudget | null;
  accept_checks: AcceptCheck[];
  /** what this process or the recording ran the task under (null: not recorded) */
  settings: RunSettings | null;
  /** delegation: the task that started this one, null for a task a person submitted */
  parent_task_id: string | null;
  /** the top of the task's tree (the task itself when it has no parent) */
  root_task_id: string;
  /** delegations down from the root: 0 for a root */
  depth: number;
  /** the agent profile a delegated task runs as; null: the orchestrator's own */
  agent: AgentProfile | null;
  /** this task's delegations by call id, in the order they started */
  children: Map<string, ChildProgress>;
  status: TaskStatus;
  /** the round of the last CONTEXT_BUILT, 0 before the first */
  round: number;
  /** the directive decided for `round`, null when the round has not been decided yet */
  directive: ExecutionDirective | null;
  /** the decided directive's work is over (outcome recorded); the next step is a new round */
  roundClosed: boolean;
  calls: Map<string, CallProgress>;
  plans: Map<string, PlanProgress>;
  pendingPermission: PendingPermission | null;
  pendingSecret: PendingSecret | null;
  /** the tools the client offered (TASK_RECEIVED.ag_ui.tools), by name: they run there */
  clientTools: Map<string, ClientTool>;
  /** calls to the client's tools waiting for their results, by request id */
  pendingClientTools: Map<string, PendingClientTool>;
  /** the task's timers by timer id, in the order they were set */
  timers: Map<string, TimerProgress>;
  /** signals sent to the task by signal id, in the order received */
  signals: Map<string, SignalProgress>;
  /** the task's waits for a signal by wait id, in the order started */
  signalWaits: Map<string, SignalWaitProgress>;
  /** by call_id; an MCP server's question has its own (elicitationCallId) and may carry the form's content */
  permissionDecisions: Map<
    string,
    { decision: PermissionDecision; args_hash: string; content?: Record<string, unknown> }
  >;
  /** answered model calls per `${backend}/${role}`: which scripted or replayed item comes next */
  modelCalls: Record<string, number>;
  /** backend of each model call, from MODEL_CALLED */
  modelCallBackends: Map<string, string>;
  /** the conversation each model call belongs to (continuationKey), from MODEL_CALLED */
  modelCallConversations: Map<string, string>;
  /** Responses API: per conversation, the last answered response and the items it saw (see continuationKey) */
  continuations: Map<string, ContinuationAnchor>;
  history: HistoryItem[];
  /** notes for the round being decided (fabricated tool results cut from the reply), shown with its history item */
  pendingNotes: string[];
  usage: TaskUsage;
  meter: MeterState;
  /** the task's todos (its own: a session's next task starts with none) */
  todos: TodoState;
  /** round policy: whether the task may change things (null: policy off) */
  mutationIntent: MutationIntent | null;
  /** the answer evaluator: verdicts so far, whether its one retry was used, its tokens, the round of the latest verdict */
  evaluation: { attempts: number; retried: boolean; tokens: number; round: number | null };
  /** round policy: the latest round's surface, from its CONTEXT_BUILT (null: policy off) */
  surface: EventPayload<'CONTEXT_BUILT'>['tool_surface'] | null;
  final: { stop_reason: StopReason; detail: string; result: string | null } | null;
  /** double-texting: the session's task this one waits to run after, until its turn began (null: none) */
  queuedBehind: string | null;
  /** double-texting: the newer task of the session that asked this one to stop (null: none did) */
  interruptedBy: string | null;
  last_seq: number;
}

const initial = (task_id: string): TaskProgress => ({
  task_id,
  session_id: '',
  input: '',
  budgets: {},
  session_budget: null,
  accept_checks: [],
  settings: null,
  parent_task_id: null,
  root_task_id: task_id,
  depth: 0,
  agent: null,
  children: new Map(),
  status: 'queued',
  round: 0,
  directive: null,
  roundClosed: false,
  calls: new Map(),
  plans: new Map(),
  pendingPermission: null,
  pendingSecret: null,
  clientTools: new Map(),
  pendingClientTools: new Map(),
  timers: new Map(),
  signals: new Map(),
  signalWaits: new Map(),
  permissionDecisions: new Map(),
  modelCalls: {},
  modelCallBackends: new Map(),
  modelCallConversations: new Map(),
  continuations: new Map(),
  history: [],
  pendingNotes: [],
  usage: emptyUsage(),
  meter: initialMeterState(),
  todos: initialTodoState(),
  mutationIntent: null,
  evaluation: { attempts: 0, retried: false, tokens: 0, round: null },
  surface: null,
  final: null,
  queuedBehind: null,
  interruptedBy: null,
  last_seq: 0,
});

export const modelCallKey = (backend: string, role: Role): string => `${backend}/${role}`;
/** one stored conversation on a server: a role's calls through one backend, a coder step's apart from the rest */
export const continuationKey = (backend: string, role: Role, stepId: string | undefined): string =>
  `${backend}/${role}/${stepId ?? ''}`;
export const planIdFor = (round: number): string => `plan_${round}`;
export const callIdFor = (round: number, stepId: string | null): string =>
  stepId ? `call_${round}_${stepId}` : `call_${round}`;
/** the k-th tool call of the coder's reply in turn `turn` of a coder step: deterministic, so a resumed step finds it done */
export const coderCallIdFor = (round: number, stepId: string, turn: number, k: number): string =>
  `${callIdFor(round, stepId)}_t${turn}_${k}`;

/** A result as a model reads it: command output as its text, anything else as JSON. */
export function resultText(v: unknown): string {
  if (typeof v === 'string') return v;
  const o = v as { stdout?: unknown; stderr?: unknown; exit_code?: unknown } | null;
  if (o && typeof o === 'object' && typeof o.stdout === 'string') {
    const parts = [o.stdout.trimEnd()];
    if (typeof o.stderr === 'string' && o.stderr.trim()) parts.push(`stderr: ${o.stderr.trimEnd()}`);
    if (o.exit_code !== undefined && o.exit_code !== 0) parts.push(`exit code ${String(o.exit_code)}`);
    return parts.join('\n');
  }
  return JSON.stringify(v);
}

function currentHistory(p: TaskProgress): HistoryItem | undefined {
  const last = p.history[p.history.length - 1];
  return last && last.round === p.round ? last : undefined;
}

function note(p: TaskProgress, line: string, ok: boolean, sourceEventId?: string): void {
  const h = currentHistory(p);
  if (!h) return;
  h.results.push(line);
  if (sourceEventId) h.sources = { ...h.sources, [h.results.length - 1]: sourceEventId };
  if (!ok) h.ok = false;
}

/** Rounds summarised by the utility role give way to one summary item where the first of them stood. */
function compactHistory(p: TaskProgress, data: Record<string, unknown>): void {
  const rounds = Array.isArray(data.rounds)
    ? data.rounds.filter((r): r is number => typeof r === 'number')
    : [];
  const at = p.history.findIndex((h) => rounds.includes(h.round));
  if (at === -1 || typeof data.summary !== 'string') return;
  const summary: HistoryItem = {
    round: Math.max(...rounds),
    directive: COMPACTED_ROUNDS,
    results: [data.summary],
    ok: true,
  };
  p.history = [
    ...p.history.slice(0, at),
    summary,
    ...p.history.slice(at).filter((h) => !rounds.includes(h.round)),
  ];
}

/**
 * The id of the `index`-th question (1, 2, ...) an MCP server asks during call `callId`: its
 * request and answer are logged under it, apart from the call's own permission decision.
 */
export const elicitationCallId = (callId: string, index: number): string => `${callId}.elicit${index}`;

/** The call an elicitation id belongs to, or null for an ordinary call id. */
export function elicitedCall(id: string): string | null {
  const m = /^(.+)\.elicit\d+$/.exec(id);
  return m ? m[1] : null;
}

/** A request for one of a call's questions: the attempt stopped for it and is issued again once answered. */
function markAwaitingInput(p: TaskProgress, requestCallId: string): void {
  const call = p.calls.get(elicitedCall(requestCallId) ?? '');
  if (call) call.awaiting_input = true;
}

/** A directive without steps of its own is over once it ran its single tool call. */
function closesWithTool(p: TaskProgress, callId: string): boolean {
  return p.directive?.type === 'tool' && callId === callIdFor(p.round, null);
}

/** How a child's end reads in its parent's context: its result when it completed, else its stop and why. */
export function childOutcomeText(ended: EventPayload<'CHILD_TASK_ENDED'>): string {
  if (ended.status === 'completed') return ended.result ?? '';
  const result = ended.result ? `; its last result: ${ended.result}` : '';
  return `child task ${ended.child_task_id} ended ${ended.stop_reason}: ${ended.detail}${result}`;
}

/**
 * A person's answer lets the task run on, unless calls to the client's tools are still out: it then
 * waits for those too, and runs on with all the answers.
 */
const afterAnswer = (p: TaskProgress): TaskStatus =>
  p.pendingClientTools.size > 0 ? 'awaiting_client_tool' : 'running';

/** The client's result for one of its tools closes the request; with none left out the task runs on. */
function clientToolAnswered(p: TaskProgress, requestId: string | undefined): void {
  if (requestId === undefined || !p.pendingClientTools.delete(requestId)) return;
  if (p.status === 'awaiting_client_tool' && p.pendingClientTools.size === 0) p.status = 'running';
}

/** evolve: one event into the progress. Mutates and returns `p` (the fold owns it). */
export function evolveProgress(p: TaskProgress, e: RuntimeEvent): TaskProgress {
  p.last_seq = e.sequence;
  // Usage is the run-discipline meter's fold, the same numbers its budgets are checked against.
  p.meter = meterEvolve(p.meter, e);
  p.usage = p.meter.usage;
  p.todos = todoEvolve(p.todos, e);
  switch (e.type) {
    case 'TASK_RECEIVED':
      Object.assign(p, {
        session_id: e.payload.session_id,
        input: e.payload.input,
        budgets: e.payload.budgets,
        session_budget: e.payload.session_budget ?? null,
        accept_checks: e.payload.accept_checks,
        settings: e.payload.settings ?? null,
        parent_task_id: e.payload.parent_task_id ?? null,
        root_task_id: e.payload.root_task_id ?? e.task_id,
        depth: e.payload.depth ?? 0,
        agent: e.payload.agent ?? null,
        mutationIntent: e.payload.mutation_intent ?? null,
        clientTools: new Map((e.payload.ag_ui?.tools ?? []).map((t) => [t.name, t])),
        queuedBehind: e.payload.queued_behind ?? null,
      });
      // the conversation so far comes first, as the oldest history
      p.history = sessionHistoryItems(e.payload.session_history ?? []);
      break;
    case 'SESSION_TURN_BEGAN':
      // the conversation as it stood when the task's turn came replaces the one it was received with
      p.history = [
        ...sessionHistoryItems(e.payload.session_history),
        ...p.history.filter((h) => !isSessionItem(h)),
      ];
      p.queuedBehind = null;
      if (e.payload.session_budget) p.session_budget = e.payload.session_budget;
      break;
    case 'INTERRUPT_REQUESTED':
      p.interruptedBy ??= e.payload.by_task_id;
      break;
    case 'CHILD_TASK_STARTED':
      p.children.set(e.payload.call_id, { started: e.payload, ended: null, remote: null });
      break;
    case 'REMOTE_TASK_UPDATED': {
      const child = p.children.get(e.payload.call_id);
      if (child) child.remote = e.payload;
      break;
    }
    case 'CHILD_TASK_ENDED': {
      const child = p.children.get(e.payload.call_id);
      if (child) child.ended = e.payload;
      break;
    }
    case 'CONTEXT_BUILT':
      p.surface = e.payload.tool_surface ?? null;
      if (e.payload.round !== p.round)
        Object.assign(p, { round: e.payload.round, directive: null, roundClosed: false });
      p.status = 'running';
      break;
    case 'ROUTER_DECIDED':
      p.directive = e.payload.directive;
      p.roundClosed = false;
      p.history.push({
        round: e.payload.round,
        directive: e.payload.directive,
        results: p.pendingNotes,
        ok: true,
        ...(e.payload.tool_calls ? { tool_calls: e.payload.tool_calls } : {}),
      });
      p.pendingNotes = [];
      break;
    case 'MODEL_CALLED':
      p.modelCallBackends.set(e.payload.call_id, e.payload.backend);
      p.modelCallConversations.set(
        e.payload.call_id,
        continuationKey(e.payload.backend, e.payload.role, e.payload.step_id),
      );
      break;
    case 'MODEL_RESPONDED': {
      const role = e.payload.role;
      const key = modelCallKey(p.modelCallBackends.get(e.payload.call_id) ?? '', role);
      p.modelCalls[key] = (p.modelCalls[key] ?? 0) + 1;
      const c = e.payload.continuation;
      const conversation = p.modelCallConversations.get(e.payload.call_id);
      if (c && conversation !== undefined)
        p.continuations.set(conversation, {
          response_id: c.response_id,
          items_hash: c.items_hash,
          item_count: c.item_count,
        });
      break;
    }
    case 'PLAN_STARTED':
      p.plans.set(e.payload.plan_id, {
        plan_id: e.payload.plan_id,
        round: p.round,
        steps: e.payload.steps,
        status: new Map(e.payload.steps.map((s) => [s.id, 'pending' as StepStatus])),
        outputs: new Map(),
        errors: new Map(),
        outcome: null,
      });
      break;
    case 'STEP_STARTED':
      p.plans.get(e.payload.plan_id)?.status.set(e.payload.step_id, 'running');
      break;
    case 'STEP_COMPLETED': {
      const plan = p.plans.get(e.payload.plan_id);
      plan?.status.set(e.payload.step_id, 'completed');
      plan?.outputs.set(e.payload.step_id, e.payload.output);
      note(p, `step ${e.payload.step_id} completed: ${resultText(e.payload.output)}`, true, e.event_id);
      break;
    }
    case 'STEP_FAILED': {
      const plan = p.plans.get(e.payload.plan_id);
      plan?.status.set(e.payload.step_id, e.payload.skipped ? 'skipped' : 'failed');
      plan?.errors.set(e.payload.step_id, e.payload.error);
      note(
        p,
        `step ${e.payload.step_id} ${e.payload.skipped ? 'skipped' : 'failed'}: ${e.payload.error}`,
        false,
        e.event_id,
      );
      break;
    }
    case 'PLAN_COMPLETED': {
      const plan = p.plans.get(e.payload.plan_id);
      if (plan) plan.outcome = 'completed';
      p.roundClosed = true;
      break;
    }
    case 'PLAN_FAILED': {
      const plan = e.payload.plan_id ? p.plans.get(e.payload.plan_id) : undefined;
      if (plan) plan.outcome = 'failed';
      p.roundClosed = true;
      note(p, `plan failed: ${e.payload.reason}`, false);
      break;
    }
    case 'TOOL_CALLED':
      p.calls.set(e.payload.call_id, {
        call_id: e.payload.call_id,
        tool: e.payload.tool,
        args: e.payload.args,
        args_hash: e.payload.args_hash,
        step_id: e.payload.step_id,
        attempt: e.payload.attempt,
        outcome: null,
        result: null,
        error: null,
        error_kind: null,
      });
      break;
    case 'TOOL_COMPLETED': {
      clientToolAnswered(p, e.payload.request_id);
      const call = p.calls.get(e.payload.call_id);
      if (call) Object.assign(call, { outcome: 'completed', result: e.payload.result });
      if (closesWithTool(p, e.payload.call_id)) {
        p.roundClosed = true;
        note(p, `${e.payload.tool}: ${resultText(e.payload.result.output)}`, true, e.event_id);
      }
      break;
    }
    case 'TOOL_FAILED': {
      clientToolAnswered(p, e.payload.request_id);
      const prev = p.calls.get(e.payload.call_id);
      p.calls.set(e.payload.call_id, {
        call_id: e.payload.call_id,
        tool: e.payload.tool,
        args: prev?.args ?? {},
        args_hash: prev?.args_hash ?? '',
        step_id: prev?.step_id ?? null,
        attempt: prev?.attempt ?? 0,
        outcome: 'failed',
        result: e.payload.result,
        error: e.payload.error,
        error_kind: e.payload.error_kind,
      });
      if (closesWithTool(p, e.payload.call_id)) {
        p.roundClosed = true;
        note(p, `${e.payload.tool} failed (${e.payload.error_kind}): ${e.payload.error}`, false, e.event_id);
      }
      break;
    }
    case 'TASK_AWAITING_PERMISSION':
      p.pendingPermission = e.payload;
      p.status = 'awaiting_permission';
      markAwaitingInput(p, e.payload.call_id);
      break;
    case 'PERMISSION_RESOLVED':
      p.permissionDecisions.set(e.payload.call_id, {
        decision: e.payload.decision,
        args_hash: e.payload.args_hash,
        ...(e.payload.content ? { content: e.payload.content } : {}),
      });
      p.pendingPermission = null;
      p.status = afterAnswer(p);
      break;
    case 'TASK_AWAITING_CLIENT_TOOL':
      p.pendingClientTools.set(e.payload.request_id, e.payload);
      // a person's question asked before it is still what the task waits for first
      if (p.status !== 'awaiting_permission' && p.status !== 'awaiting_secret')
        p.status = 'awaiting_client_tool';
      break;
    case 'TASK_AWAITING_SECRET':
      p.pendingSecret = e.payload;
      p.status = 'awaiting_secret';
      markAwaitingInput(p, e.payload.call_id);
      break;
    case 'SECRET_PROVIDED':
      p.pendingSecret = null;
      p.status = afterAnswer(p);
      break;
    case 'TIMER_SET':
      p.timers.set(e.payload.timer_id, { set: e.payload, fired: false });
      p.status = 'waiting';
      break;
    case 'TIMER_FIRED': {
      const timer = p.timers.get(e.payload.timer_id);
      // a wait for a signal whose timer fires ends timed out
      const wait = p.signalWaits.get(e.payload.timer_id);
      if (wait?.outcome) break;
      if (wait) wait.outcome = { kind: 'timeout' };
      if (timer) timer.fired = true;
      p.status = 'running';
      break;
    }
    case 'SIGNAL_RECEIVED':
      if (!p.signals.has(e.payload.signal_id))
        p.signals.set(e.payload.signal_id, { received: e.payload, taken_by: null });
      break;
    case 'SIGNAL_AWAITED':
      p.signalWaits.set(e.payload.wait_id, { awaited: e.payload, outcome: null });
      p.status = 'waiting';
      break;
    case 'SIGNAL_DELIVERED': {
      const wait = p.signalWaits.get(e.payload.wait_id);
      const signal = p.signals.get(e.payload.signal_id);
      if (!wait || wait.outcome || !signal || signal.taken_by !== null) break;
      wait.outcome = { kind: 'signal', signal_id: signal.received.signal_id };
      signal.taken_by = wait.awaited.wait_id;
      p.status = 'running';
      break;
    }
    case 'GUARD_TRIGGERED':
      // A directive-less answer ends its round with only the reminder to show for it.
      if (e.payload.guard === 'completion_reminder' && !currentHistory(p)) {
        p.history.push({ round: p.round, directive: null, results: p.pendingNotes, ok: false });
        p.pendingNotes = [];
        p.roundClosed = true;
      }
      // The model is told its own "tool results" were cut, next to whatever the round decided.
      if (e.payload.guard === 'correction' && e.payload.data.fabricated)
        p.pendingNotes.push(`note: ${e.payload.detail}`);
      if (
        e.payload.guard === 'completion_reminder' ||
        e.payload.guard === 'repeat_reminder' ||
        e.payload.guard === 'circuit_breaker'
      )
        note(p, `note: ${e.payload.detail}`, true);
      if (e.payload.guard === 'compaction') compactHistory(p, e.payload.data);
      // the evaluator found the answer wanting: the round closes with its feedback and the model answers again
      if (e.payload.guard === 'answer_retry') {
        note(p, `note: ${e.payload.detail}`, false);
        p.roundClosed = true;
      }
      break;
    case 'ANSWER_EVALUATED':
      p.evaluation = {
        attempts: p.evaluation.attempts + 1,
        retried: p.evaluation.retried || e.payload.retry,
        tokens: p.evaluation.tokens + e.payload.tokens,
        round: e.payload.round,
      };
      break;
    case 'TASK_COMPLETED':
      p.final = { stop_reason: e.payload.stop_reason, detail: e.payload.detail, result: e.payload.result };
      p.status = 'completed';
      break;
    case 'TASK_FAILED':
      p.final = { stop_reason: e.payload.stop_reason, detail: e.payload.detail, result: e.payload.result };
      p.status = 'failed';
      break;
    case 'TASK_CANCELLED':
      p.final = { stop_reason: e.payload.stop_reason, detail: e.payload.detail, result: null };
      p.status = 'cancelled';
      break;
    case 'CRITIC_RESULT':
    case 'MEMORY_WRITTEN':
    case 'CHECKPOINT_SAVED':
    case 'ACCEPTANCE_DECIDED':
    case 'OUTPUT_CHUNK':
    case 'REASONING_CHUNK':
    case 'CALLBACK_REGISTERED':
    case 'CALLBACK_REMOVED':
    case 'DELIVERY_STARTED':
    case 'DELIVERY_SUCCEEDED':
    case 'DELIVERY_FAILED':
    case 'TODO_ADDED':
    case 'TODO_UPDATED':
    case 'TASKS_ARCHIVED':
    case 'TASKS_RESTORED':
    case 'TASKS_CATALOGUED':
    case 'SESSION_ERASED':
    case 'TASK_TREE_ERASED':
    case 'SESSION_CONFIGURED':
    case 'TASK_ROLLED_BACK':
    case 'SCHEDULE_CREATED':
    case 'SCHEDULE_PAUSED':
    case 'SCHEDULE_RESUMED':
    case 'SCHEDULE_DELETED':
    case 'SCHEDULE_FIRED':
    case 'HOOK_RECEIVED':
    case 'SESSION_BUDGET_SET':
      break;
    default: {
      const unreachable: never = e;
      return unreachable;
    }
  }
  return p;
}

/** The timer the task waits for, or null when it waits for none (a wait for a signal that ended has none). */
export function pendingTimer(p: TaskProgress): EventPayload<'TIMER_SET'> | null {
  if (p.status !== 'waiting') return null;
  for (const t of p.timers.values())
    if (!t.fired && !p.signalWaits.get(t.set.timer_id)?.outcome) return t.set;
  return null;
}

/** The wait for a signal the task is in, or null when it waits for none. */
export function pendingSignalWait(p: TaskProgress): EventPayload<'SIGNAL_AWAITED'> | null {
  if (p.status !== 'waiting') return null;
  for (const w of p.signalWaits.values()) if (!w.outcome) return w.awaited;
  return null;
}

/** The oldest signal of this name no wait has taken yet: the next a wait for it takes. */
export function keptSignal(p: TaskProgress, name: string): EventPayload<'SIGNAL_RECEIVED'> | null {
  for (const s of p.signals.values()) if (s.taken_by === null && s.received.name === name) return s.received;
  return null;
}

export function foldProgress(taskId: string, events: readonly RuntimeEvent[]): TaskProgress {
  return events.reduce(evolveProgress, initial(taskId));
}
