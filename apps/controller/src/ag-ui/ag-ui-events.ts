import { EventType as AgUi, PROTOCOL_VERSION } from '@ag-ui/core';
import type {
  Event as AgUiEvent,
  Interrupt,
  Message,
  RunFinishedEvent,
  TokenUsage,
  ToolCall,
} from '@ag-ui/core';
import { RuntimeEvent, TaskStatus, TaskUsage, canonicalJson } from '@runledger/contracts';
import { PendingRequest, TaskState, evolve } from '@runledger/state-store';

/**
 * One AG-UI run over a task's log. A run is one POST /ag-ui: a new run shows the task from its
 * first event; a run that resumes an interrupted one shows the events after the requests it
 * answers were asked. Everything here is a pure function of the frame and the log, so the same
 * log gives the same AG-UI events, with the same ids, on any instance and after any restart.
 */
export interface AgUiRunFrame {
  threadId: string;
  runId: string;
  taskId: string;
  /** the run shows the task's events after this sequence (0: from the start) */
  after: number;
}

/**
 * An AG-UI event with its SSE id, `<sequence>-<n>`: the n-th event (from 0) derived from the log
 * event of that sequence (RUN_STARTED and the first snapshot from the frame's `after`). Ids grow
 * with the log, so Last-Event-ID says exactly where a reconnect resumes.
 */
export interface AgUiEmitted {
  id: string;
  event: AgUiEvent;
}

/** What the run shows of the task as AG-UI state: STATE_SNAPSHOT once, then STATE_DELTA patches. */
export interface AgUiTaskState {
  task_id: string;
  status: TaskStatus;
  stop_reason: string | null;
  result: string | null;
  pending: { request_id: string; kind: PendingRequest['kind']; tool: string; reason: string }[];
  usage: Pick<TaskUsage, 'rounds' | 'tool_calls' | 'model_calls' | 'total_tokens' | 'cost_usd'>;
}

export interface AgUiRunState {
  frame: AgUiRunFrame;
  task: TaskState | null;
  /** the task's usage when the run started: RUN_FINISHED reports what this run used */
  usageAtStart: TaskUsage | null;
  /** the last log event folded, and how many AG-UI events it gave so far */
  seq: number;
  emittedAtSeq: number;
  ended: boolean;
  /** the sequence each permission or secret request of the task was asked at */
  asked: Record<string, number>;
  published: AgUiTaskState | null;
  /** the text message this run has open */
  text: { messageId: string; callId: string } | null;
  /** the reasoning message this run has open (REASONING_CHUNK) */
  reasoning: { messageId: string; callId: string } | null;
  /** the model calls whose reasoning streamed: their MODEL_RESPONDED.reasoning is not shown again */
  reasonedCalls: string[];
  /** the text the task's latest model call streamed (the answer is not sent twice) */
  lastStreamed: { callId: string; content: string } | null;
  openSteps: string[];
  /** the task's tool calls shown so far (by any run of the task) */
  startedCalls: string[];
  /**
   * The thread's messages as a frontend holds them after every run so far: the earlier tasks' and
   * this task's up to the last event. MESSAGES_SNAPSHOT sends them before the run ends.
   */
  messages: Message[];
}

export interface AgUiStep {
  state: AgUiRunState;
  out: AgUiEmitted[];
}

/** The id of the interrupt for a pending request: the task and the request, so a resume finds both. */
export const interruptIdOf = (taskId: string, requestId: string): string => `${taskId}/${requestId}`;

export function parseInterruptId(id: string): { taskId: string; requestId: string } | null {
  const m = /^([A-Za-z0-9_.:-]{1,200})\/([A-Za-z0-9_.:-]{1,200})$/.exec(id);
  return m ? { taskId: m[1], requestId: m[2] } : null;
}

/** `<sequence>-<n>` as [sequence, n]; null when it is not one of ours. */
export function parseEventId(id: string): [number, number] | null {
  const m = /^(\d{1,15})-(\d{1,6})$/.exec(id);
  return m ? [Number(m[1]), Number(m[2])] : null;
}

/** Whether the event id `id` comes after `cursor` in the run's stream. */
export const isAfter = (id: string, cursor: [number, number] | null): boolean => {
  if (!cursor) return true;
  const [seq, n] = parseEventId(id)!;
  return seq > cursor[0] || (seq === cursor[0] && n > cursor[1]);
};

const AWAITING: readonly TaskStatus[] = ['awaiting_permission', 'awaiting_secret', 'awaiting_client_tool'];
export const isAwaiting = (s: AgUiRunState): boolean => s.task !== null && AWAITING.includes(s.task.status);

export const PERMISSION_ANSWER_SCHEMA = {
  type: 'object',
  properties: {
    decision: { type: 'string', enum: ['allow_once', 'allow_always', 'deny', 'ask_always'] },
    content: {
      type: 'object',
      description: "an MCP server's form (rule mcp_elicitation): what was filled in",
    },
  },
  required: ['decision'],
};
/** The answer to a call of a tool the frontend offered: the tool's result (any JSON), or why it failed. */
export const CLIENT_TOOL_ANSWER_SCHEMA = {
  type: 'object',
  properties: {
    result: { description: "the tool's result, any JSON value" },
    error: { type: 'string', minLength: 1, description: 'why the tool failed (instead of result)' },
  },
  oneOf: [{ required: ['result'] }, { required: ['error'] }],
};

/**
 * A tool call's id in the thread: a task's call ids (`call_1`, ...) repeat from task to task, and a
 * frontend keeps one list of the thread's tool calls.
 */
export const toolCallIdOf = (taskId: string, callId: string): string => `${taskId}.${callId}`;

export const SECRET_ANSWER_SCHEMA = {
  type: 'object',
  properties: { secret: { type: 'string', minLength: 1 } },
  required: ['secret'],
};

const initialState = (frame: AgUiRunFrame, thread: readonly Message[]): AgUiRunState => ({
  frame,
  task: null,
  usageAtStart: null,
  seq: frame.after,
  emittedAtSeq: 0,
  ended: false,
  asked: {},
  published: null,
  text: null,
  reasoning: null,
  reasonedCalls: [],
  lastStreamed: null,
  openSteps: [],
  startedCalls: [],
  messages: [...thread],
});

/**
 * Opens the run: RUN_STARTED, then the task's state. The events up to the frame's start are
 * mapped as the earlier runs showed them (not sent), so the run knows the calls, texts and
 * messages the frontend has already. `thread` is the messages of the thread's earlier tasks.
 */
export function openRun(
  frame: AgUiRunFrame,
  before: readonly RuntimeEvent[],
  thread: readonly Message[] = [],
): AgUiStep {
  let state = initialState(frame, thread);
  for (const e of before) if (e.sequence <= frame.after) state = shown(state, e);
  // the earlier run closed what it had open when it ended
  state = {
    ...state,
    text: null,
    reasoning: null,
    openSteps: [],
    seq: frame.after,
    usageAtStart: state.task?.usage ?? null,
  };
  const events: AgUiEvent[] = [
    {
      type: AgUi.RUN_STARTED,
      threadId: frame.threadId,
      runId: frame.runId,
      protocolVersion: PROTOCOL_VERSION,
    },
  ];
  const published = state.task ? publishedOf(state.task) : null;
  if (published) events.push({ type: AgUi.STATE_SNAPSHOT, snapshot: published });
  return emit({ ...state, published }, events);
}

/**
 * The messages a frontend holds of one task after all its runs: its user message, then what the
 * runs streamed (texts, reasoning, tool calls and their results, the answer).
 */
export function messagesOfTask(threadId: string, log: readonly RuntimeEvent[]): Message[] {
  if (log.length === 0) return [];
  const frame = { threadId, runId: '', taskId: log[0].task_id, after: 0 };
  return log.reduce(shown, initialState(frame, [])).messages;
}

/** One log event as a run shows it, with the messages it adds, nothing sent. */
function shown(state: AgUiRunState, e: RuntimeEvent): AgUiRunState {
  const { s, out } = advance(state, e);
  return { ...s, seq: e.sequence, messages: applyMessages(s.messages, out) };
}

/**
 * The AG-UI events of the next log event. An answer to a request asked during this run ends the
 * run first, with the interrupts that were pending just before it: the answer belongs to the run
 * that resumes.
 */
export function mapEvent(state: AgUiRunState, e: RuntimeEvent): AgUiStep {
  if (state.ended || e.sequence <= state.seq) return { state, out: [] };
  const answers =
    e.type === 'PERMISSION_RESOLVED' || e.type === 'SECRET_PROVIDED'
      ? e.payload.request_id
      : e.type === 'TOOL_COMPLETED' || e.type === 'TOOL_FAILED'
        ? e.payload.request_id
        : undefined;
  if (answers !== undefined && isAwaiting(state) && (state.asked[answers] ?? 0) > state.frame.after)
    return finishParked(state);
  const { s, out } = advance({ ...state, seq: e.sequence, emittedAtSeq: 0 }, e);
  switch (e.type) {
    case 'TASK_COMPLETED':
      return emit(s, [...out, ...closeOpen(s), finished(s, { type: 'success' }, e.payload.result)], true);
    case 'TASK_CANCELLED':
      return emit(s, [...out, ...closeOpen(s), finished(s, { type: 'cancelled' })], true);
    case 'TASK_FAILED':
      return emit(
        s,
        [
          ...out,
          {
            type: AgUi.RUN_ERROR,
            message: e.payload.detail || e.payload.stop_reason,
            code: e.payload.stop_reason,
            ...usageField(s),
          },
        ],
        true,
      );
    default:
      return emit(s, out);
  }
}

/** What a log event shows, before a run's end: the state after it and the AG-UI events it gives. */
function advance(state: AgUiRunState, e: RuntimeEvent): { s: AgUiRunState; out: AgUiEvent[] } {
  const before = state;
  let s: AgUiRunState = fold(state, e);
  const out: AgUiEvent[] = [];
  if (e.type !== 'OUTPUT_CHUNK' && s.text) {
    out.push({ type: AgUi.TEXT_MESSAGE_END, messageId: s.text.messageId });
    s = { ...s, text: null };
  }
  if (e.type !== 'REASONING_CHUNK' && s.reasoning) {
    out.push(...reasoningEnd(s.reasoning.messageId));
    s = { ...s, reasoning: null };
  }
  switch (e.type) {
    case 'TASK_RECEIVED':
      s = { ...s, messages: [...s.messages, userMessageOf(e)] };
      break;
    case 'OUTPUT_CHUNK': {
      const { call_id, delta } = e.payload;
      if (!delta) break;
      if (s.text && s.text.callId !== call_id) {
        out.push({ type: AgUi.TEXT_MESSAGE_END, messageId: s.text.messageId });
        s = { ...s, text: null };
      }
      if (!s.text) {
        const messageId = `${call_id}-text`;
        out.push({ type: AgUi.TEXT_MESSAGE_START, messageId, role: 'assistant' });
        s = { ...s, text: { messageId, callId: call_id } };
      }
      out.push({ type: AgUi.TEXT_MESSAGE_CONTENT, messageId: s.text!.messageId, delta });
      break;
    }
    case 'REASONING_CHUNK': {
      const { call_id, delta } = e.payload;
      if (!delta) break;
      if (s.reasoning && s.reasoning.callId !== call_id) {
        out.push(...reasoningEnd(s.reasoning.messageId));
        s = { ...s, reasoning: null };
      }
      if (!s.reasoning) {
        const messageId = `${call_id}-reasoning`;
        out.push(
          { type: AgUi.REASONING_START, messageId },
          { type: AgUi.REASONING_MESSAGE_START, messageId, role: 'reasoning' },
        );
        s = { ...s, reasoning: { messageId, callId: call_id } };
      }
      out.push({ type: AgUi.REASONING_MESSAGE_CONTENT, messageId: s.reasoning!.messageId, delta });
      break;
    }
    case 'MODEL_RESPONDED': {
      // reasoning that did not stream (a whole reply) is shown with the reply
      const { reasoning, call_id } = e.payload;
      if (!reasoning || before.reasonedCalls.includes(call_id)) break;
      const messageId = `${call_id}-reasoning`;
      out.push(
        { type: AgUi.REASONING_START, messageId },
        { type: AgUi.REASONING_MESSAGE_START, messageId, role: 'reasoning' },
        { type: AgUi.REASONING_MESSAGE_CONTENT, messageId, delta: reasoning },
        ...reasoningEnd(messageId),
      );
      break;
    }
    case 'STEP_STARTED': {
      const stepName = e.payload.step_id;
      if (s.openSteps.includes(stepName)) break;
      out.push({ type: AgUi.STEP_STARTED, stepName });
      s = { ...s, openSteps: [...s.openSteps, stepName] };
      break;
    }
    case 'STEP_COMPLETED':
    case 'STEP_FAILED': {
      const stepName = e.payload.step_id;
      if (!s.openSteps.includes(stepName)) break;
      out.push({ type: AgUi.STEP_FINISHED, stepName });
      s = { ...s, openSteps: s.openSteps.filter((n) => n !== stepName) };
      break;
    }
    case 'TOOL_CALLED': {
      const { call_id, tool, args } = e.payload;
      if (before.startedCalls.includes(call_id)) break;
      const toolCallId = toolCallIdOf(state.frame.taskId, call_id);
      out.push(
        { type: AgUi.TOOL_CALL_START, toolCallId, toolCallName: tool },
        { type: AgUi.TOOL_CALL_ARGS, toolCallId, delta: JSON.stringify(args) },
        { type: AgUi.TOOL_CALL_END, toolCallId },
      );
      break;
    }
    case 'TOOL_COMPLETED':
    case 'TOOL_FAILED': {
      const { call_id, tool } = e.payload;
      const toolCallId = toolCallIdOf(state.frame.taskId, call_id);
      // a call refused before it ran (denied, hard stop) has no TOOL_CALLED: it is shown as called, with its refusal
      if (!before.startedCalls.includes(call_id))
        out.push(
          { type: AgUi.TOOL_CALL_START, toolCallId, toolCallName: tool },
          { type: AgUi.TOOL_CALL_END, toolCallId },
        );
      // a frontend tool's result too: the frontend sees it in the thread as recorded
      out.push({
        type: AgUi.TOOL_CALL_RESULT,
        messageId: `${toolCallId}-result-${e.sequence}`,
        toolCallId,
        role: 'tool',
        content:
          e.type === 'TOOL_COMPLETED'
            ? contentOf(e.payload.result.output)
            : `${e.payload.error_kind}: ${e.payload.error}`,
      });
      break;
    }
    case 'TASK_COMPLETED': {
      const answer = e.payload.result;
      if (answer && answer !== before.lastStreamed?.content) {
        const messageId = `${state.frame.taskId}-answer`;
        out.push(
          { type: AgUi.TEXT_MESSAGE_START, messageId, role: 'assistant' },
          { type: AgUi.TEXT_MESSAGE_CONTENT, messageId, delta: answer },
          { type: AgUi.TEXT_MESSAGE_END, messageId },
        );
      }
      break;
    }
    default:
      break;
  }
  const published = s.task ? publishedOf(s.task) : null;
  if (published) {
    if (!before.published) out.push({ type: AgUi.STATE_SNAPSHOT, snapshot: published });
    else {
      const delta = stateDelta(before.published, published);
      if (delta.length) out.push({ type: AgUi.STATE_DELTA, delta });
    }
    s = { ...s, published };
  }
  return { s, out };
}

/** The task's user message: as the frontend sent it (AG-UI), else its input under an id of the task. */
function userMessageOf(e: RuntimeEvent<'TASK_RECEIVED'>): Message {
  const sent = e.payload.ag_ui?.user_message;
  if (sent)
    return {
      id: sent.id,
      role: 'user',
      content: sent.content as Extract<Message, { role: 'user' }>['content'],
      ...(sent.name !== undefined ? { name: sent.name } : {}),
    };
  return { id: `${e.task_id}-user`, role: 'user', content: e.payload.input };
}

/**
 * The messages after AG-UI events, as @ag-ui/client's HttpAgent applies them: a text or reasoning
 * message by its id, a tool call as an assistant message of its own, a result after its call.
 */
export function applyMessages(messages: Message[], events: readonly AgUiEvent[]): Message[] {
  let out = messages;
  const edit = (index: number, change: (m: Message) => Message) => {
    out = out === messages ? [...out] : out;
    out[index] = change(out[index]);
  };
  const add = (m: Message, at = out.length) => {
    out = out === messages ? [...out] : out;
    out.splice(at, 0, m);
  };
  const callAt = (toolCallId: string) =>
    out.findIndex((m) => m.role === 'assistant' && (m.toolCalls ?? []).some((c) => c.id === toolCallId));
  const withCall = (m: Message, toolCallId: string, change: (c: ToolCall) => ToolCall): Message =>
    m.role === 'assistant'
      ? { ...m, toolCalls: (m.toolCalls ?? []).map((c) => (c.id === toolCallId ? change(c) : c)) }
      : m;
  for (const e of events) {
    switch (e.type) {
      case AgUi.TEXT_MESSAGE_START:
        if (!out.some((m) => m.id === e.messageId))
          add({ id: e.messageId, role: e.role ?? 'assistant', content: '' } as Message);
        break;
      case AgUi.REASONING_MESSAGE_START:
        if (!out.some((m) => m.id === e.messageId)) add({ id: e.messageId, role: 'reasoning', content: '' });
        break;
      case AgUi.TEXT_MESSAGE_CONTENT:
      case AgUi.REASONING_MESSAGE_CONTENT: {
        const i = out.findIndex((m) => m.id === e.messageId);
        if (i >= 0)
          edit(
            i,
            (m) =>
              ({ ...m, content: `${typeof m.content === 'string' ? m.content : ''}${e.delta}` }) as Message,
          );
        break;
      }
      case AgUi.TOOL_CALL_START: {
        const i = callAt(e.toolCallId);
        if (i >= 0)
          edit(i, (m) =>
            withCall(m, e.toolCallId, (c) => ({ ...c, function: { ...c.function, name: e.toolCallName } })),
          );
        else
          add({
            id: e.toolCallId,
            role: 'assistant',
            toolCalls: [
              { id: e.toolCallId, type: 'function', function: { name: e.toolCallName, arguments: '' } },
            ],
          });
        break;
      }
      case AgUi.TOOL_CALL_ARGS: {
        const i = callAt(e.toolCallId);
        if (i >= 0)
          edit(i, (m) =>
            withCall(m, e.toolCallId, (c) => ({
              ...c,
              function: { ...c.function, arguments: c.function.arguments + e.delta },
            })),
          );
        break;
      }
      case AgUi.TOOL_CALL_RESULT: {
        const result: Message = {
          id: e.messageId,
          role: 'tool',
          toolCallId: e.toolCallId,
          content: e.content,
        };
        const i = callAt(e.toolCallId);
        if (i < 0) add(result);
        else {
          let at = i + 1;
          while (at < out.length && out[at].role === 'tool') at++;
          add(result, at);
        }
        break;
      }
      default:
        break;
    }
  }
  return out;
}

/**
 * Ends the run on the task's pending requests: one interrupt each (outcome interrupt). Called when
 * the task waits and the log holds nothing after the run's last event, and before an answer to a
 * request the run asked. Nothing when the task is not waiting.
 */
export function finishParked(state: AgUiRunState): AgUiStep {
  if (state.ended || !isAwaiting(state)) return { state, out: [] };
  const interrupts = state.task!.pending_requests.map((p) => interruptOf(state.frame.taskId, p));
  return emit(state, [...closeOpen(state), finished(state, { type: 'interrupt', interrupts })], true);
}

function interruptOf(taskId: string, p: PendingRequest): Interrupt {
  const common = { task_id: taskId, request_id: p.request_id, call_id: p.call_id, tool: p.tool };
  if (p.kind === 'client_tool')
    return {
      id: interruptIdOf(taskId, p.request_id),
      reason: 'tool_call',
      message: `run ${p.tool} and resume with its result`,
      toolCallId: toolCallIdOf(taskId, p.call_id),
      responseSchema: CLIENT_TOOL_ANSWER_SCHEMA,
      metadata: { ...common, kind: 'client_tool', name: p.tool, args: p.args ?? {} },
    };
  if (p.kind === 'permission')
    return {
      id: interruptIdOf(taskId, p.request_id),
      reason: 'permission_required',
      message: p.reason,
      responseSchema: PERMISSION_ANSWER_SCHEMA,
      metadata: {
        ...common,
        kind: 'permission',
        args: p.args ?? {},
        // what an allow_always answer would cover from now on
        ...(p.covers ? { covers: p.covers } : {}),
      },
    };
  return {
    id: interruptIdOf(taskId, p.request_id),
    reason: 'secret_required',
    message: p.reason,
    responseSchema: SECRET_ANSWER_SCHEMA,
    metadata: { ...common, kind: 'secret', secret_name: p.secret_name ?? '' },
  };
}

function fold(state: AgUiRunState, e: RuntimeEvent): AgUiRunState {
  const asked =
    e.type === 'TASK_AWAITING_PERMISSION' ||
    e.type === 'TASK_AWAITING_SECRET' ||
    e.type === 'TASK_AWAITING_CLIENT_TOOL'
      ? { ...state.asked, [e.payload.request_id]: e.sequence }
      : state.asked;
  const call =
    e.type === 'TOOL_CALLED' || e.type === 'TOOL_COMPLETED' || e.type === 'TOOL_FAILED'
      ? e.payload.call_id
      : null;
  const reasonedCalls =
    e.type === 'REASONING_CHUNK' && !state.reasonedCalls.includes(e.payload.call_id)
      ? [...state.reasonedCalls, e.payload.call_id]
      : state.reasonedCalls;
  const startedCalls =
    call !== null && !state.startedCalls.includes(call) ? [...state.startedCalls, call] : state.startedCalls;
  const last = state.lastStreamed;
  const lastStreamed =
    e.type === 'OUTPUT_CHUNK' && e.payload.delta
      ? last?.callId === e.payload.call_id
        ? { ...last, content: last.content + e.payload.delta }
        : { callId: e.payload.call_id, content: e.payload.delta }
      : last;
  return { ...state, task: evolve(state.task, e), asked, startedCalls, reasonedCalls, lastStreamed };
}

const reasoningEnd = (messageId: string): AgUiEvent[] => [
  { type: AgUi.REASONING_MESSAGE_END, messageId },
  { type: AgUi.REASONING_END, messageId },
];

/** The open text or reasoning message and steps closed: a run ends with none open. */
function closeOpen(s: AgUiRunState): AgUiEvent[] {
  return [
    ...(s.text ? [{ type: AgUi.TEXT_MESSAGE_END, messageId: s.text.messageId } as AgUiEvent] : []),
    ...(s.reasoning ? reasoningEnd(s.reasoning.messageId) : []),
    ...s.openSteps.map((stepName) => ({ type: AgUi.STEP_FINISHED, stepName }) as AgUiEvent),
  ];
}

function finished(s: AgUiRunState, outcome: RunFinishedEvent['outcome'], result?: string): AgUiEvent {
  return {
    type: AgUi.RUN_FINISHED,
    threadId: s.frame.threadId,
    runId: s.frame.runId,
    outcome,
    ...(result !== undefined ? { result } : {}),
    ...usageField(s),
  };
}

/** The tokens this run's model calls used (the task's since the run started), when there were any. */
function usageField(s: AgUiRunState): { usage?: TokenUsage[] } {
  const now = s.task?.usage;
  if (!now) return {};
  const start = s.usageAtStart;
  const inputTokens = now.prompt_tokens - (start?.prompt_tokens ?? 0);
  const outputTokens = now.completion_tokens - (start?.completion_tokens ?? 0);
  if (inputTokens <= 0 && outputTokens <= 0) return {};
  return { usage: [{ inputTokens, outputTokens, totalTokens: inputTokens + outputTokens }] };
}

/**
 * The events with their ids, the state's messages after them; a run's end sends the thread's
 * messages (MESSAGES_SNAPSHOT) just before its last event, so a frontend's list matches the log.
 */
function emit(state: AgUiRunState, events: AgUiEvent[], ends = false): AgUiStep {
  const messages = applyMessages(state.messages, events);
  const sent: AgUiEvent[] = ends
    ? [...events.slice(0, -1), { type: AgUi.MESSAGES_SNAPSHOT, messages }, ...events.slice(-1)]
    : events;
  const out = sent.map((event, i) => ({ id: `${state.seq}-${state.emittedAtSeq + i}`, event }));
  return {
    state: {
      ...state,
      messages,
      emittedAtSeq: state.emittedAtSeq + sent.length,
      ended: state.ended || ends,
    },
    out,
  };
}

export function publishedOf(t: TaskState): AgUiTaskState {
  return {
    task_id: t.task_id,
    status: t.status,
    stop_reason: t.stop_reason,
    result: t.result,
    pending: t.pending_requests.map((p) => ({
      request_id: p.request_id,
      kind: p.kind,
      tool: p.tool,
      reason: p.reason,
    })),
    usage: {
      rounds: t.usage.rounds,
      tool_calls: t.usage.tool_calls,
      model_calls: t.usage.model_calls,
      total_tokens: t.usage.total_tokens,
      cost_usd: t.usage.cost_usd,
    },
  };
}

/** A JSON Patch replacing each top-level field that changed. */
export function stateDelta(
  from: AgUiTaskState,
  to: AgUiTaskState,
): { op: 'replace'; path: string; value: unknown }[] {
  return (Object.keys(to) as (keyof AgUiTaskState)[])
    .filter((k) => canonicalJson(from[k]) !== canonicalJson(to[k]))
    .map((k) => ({ op: 'replace', path: `/${k}`, value: to[k] }));
}

const contentOf = (output: unknown): string =>
  typeof output === 'string' ? output : output === undefined ? '' : JSON.stringify(output);
