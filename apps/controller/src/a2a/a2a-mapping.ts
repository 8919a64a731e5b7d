import {
  Artifact,
  Message,
  Part,
  Role,
  StreamResponse,
  Task,
  TaskState,
  TaskStatus as A2ATaskStatus,
} from '@a2a-js/sdk';
import { RequestMalformedError } from '@a2a-js/sdk/errors';
import {
  PermissionDecision,
  RuntimeEvent,
  StopReason,
  TaskStatus,
  isFinalEventType,
} from '@runledger/contracts';
import { PendingRequestView, TaskView, taskViewFromState } from '@runledger/runtime';
import { TaskState as OurTaskState, evolve } from '@runledger/state-store';

/**
 * Runledger's tasks as A2A 1.0 sees them, and A2A messages as Runledger takes them. Pure: the
 * handler reads the log and the views, these functions only translate.
 */

/** Our status (and, for a failure, its stop reason) as an A2A task state. */
export function a2aStateOf(status: TaskStatus, stopReason: StopReason | null, rounds: number): TaskState {
  switch (status) {
    case 'queued':
      return TaskState.TASK_STATE_SUBMITTED;
    // waiting on a timer, or on an AG-UI frontend's tool, needs nothing of an A2A client: the agent is still at work
    case 'running':
    case 'waiting':
    case 'awaiting_client_tool':
      return TaskState.TASK_STATE_WORKING;
    case 'awaiting_permission':
      return TaskState.TASK_STATE_INPUT_REQUIRED;
    case 'awaiting_secret':
      return TaskState.TASK_STATE_AUTH_REQUIRED;
    case 'completed':
      return TaskState.TASK_STATE_COMPLETED;
    case 'failed':
      // refused before any round ran (the hard-stop check on the input): the agent rejected it
      return stopReason === 'permission_denied' && rounds === 0
        ? TaskState.TASK_STATE_REJECTED
        : TaskState.TASK_STATE_FAILED;
    case 'cancelled':
      return TaskState.TASK_STATE_CANCELED;
  }
}

/** An A2A state as the status ListTasks filters by; null: no filter. REJECTED lists failed tasks. */
export function statusFilterOf(state: TaskState): TaskStatus | null {
  switch (state) {
    case TaskState.TASK_STATE_SUBMITTED:
      return 'queued';
    case TaskState.TASK_STATE_WORKING:
      return 'running';
    case TaskState.TASK_STATE_INPUT_REQUIRED:
      return 'awaiting_permission';
    case TaskState.TASK_STATE_AUTH_REQUIRED:
      return 'awaiting_secret';
    case TaskState.TASK_STATE_COMPLETED:
      return 'completed';
    case TaskState.TASK_STATE_FAILED:
    case TaskState.TASK_STATE_REJECTED:
      return 'failed';
    case TaskState.TASK_STATE_CANCELED:
      return 'cancelled';
    default:
      return null;
  }
}

export const textPart = (text: string): Part => ({
  content: { $case: 'text', value: text },
  metadata: undefined,
  filename: '',
  mediaType: 'text/plain',
});

export const dataPart = (value: Record<string, unknown>): Part => ({
  content: { $case: 'data', value },
  metadata: undefined,
  filename: '',
  mediaType: 'application/json',
});

export function agentMessage(messageId: string, taskId: string, contextId: string, parts: Part[]): Message {
  return {
    messageId,
    contextId,
    taskId,
    role: Role.ROLE_AGENT,
    parts,
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

/** The requests a person answers: an AG-UI frontend's tool calls are its own to answer. */
export const personRequests = (pending: readonly PendingRequestView[]): PendingRequestView[] =>
  pending.filter((p) => p.kind !== 'client_tool');

/**
 * What a person is asked, as the data part of an input-required (permission) or auth-required
 * (secret) message; the answer is a message whose data part is `{request_id, decision}` or
 * `{request_id, secret}`.
 */
export function requestPart(p: PendingRequestView): Part {
  return p.kind === 'permission'
    ? dataPart({
        kind: 'permission',
        task_id: p.task_id,
        request_id: p.request_id,
        tool: p.tool,
        args: p.args,
        reason: p.reason,
        covers: p.covers,
        decisions: PermissionDecision.options,
      })
    : dataPart({
        kind: 'secret',
        task_id: p.task_id,
        request_id: p.request_id,
        tool: p.tool,
        secret_name: p.secret_name,
        reason: p.reason,
      });
}

const requestLine = (p: PendingRequestView): string =>
  p.kind === 'permission'
    ? `permission needed for ${p.tool}: ${p.reason}`
    : `secret ${p.secret_name ?? ''} needed for ${p.tool}: ${p.reason}`;

/** The task's status with the message that explains it: the pending requests, or why it stopped. */
export function a2aStatusOf(view: TaskView, all: readonly PendingRequestView[]): A2ATaskStatus {
  const state = a2aStateOf(view.status, view.stop_reason, view.usage.rounds);
  const pending = personRequests(all);
  const asked =
    pending.length > 0 && (view.status === 'awaiting_permission' || view.status === 'awaiting_secret');
  const message = asked
    ? agentMessage(`${view.task_id}:status:${view.last_seq}`, view.task_id, view.session_id, [
        textPart(pending.map(requestLine).join('\n')),
        ...pending.map(requestPart),
      ])
    : view.stop_detail && view.status !== 'completed'
      ? agentMessage(`${view.task_id}:status:${view.last_seq}`, view.task_id, view.session_id, [
          textPart(view.stop_detail),
        ])
      : undefined;
  return { state, message, timestamp: view.updated_at };
}

export const resultArtifactId = (taskId: string): string => `${taskId}:result`;

export function resultArtifact(taskId: string, result: string): Artifact {
  return {
    artifactId: resultArtifactId(taskId),
    name: 'result',
    description: "the task's answer",
    parts: [textPart(result)],
    metadata: undefined,
    extensions: [],
  };
}

/** A file a task wrote in the allowed root, as read when the task is shown (null text: not UTF-8 text). */
export interface WrittenFile {
  path: string;
  text: string | null;
  bytes: number;
  truncated: boolean;
}

export const fileArtifactId = (taskId: string, path: string): string => `${taskId}:file:${path}`;

const MEDIA_TYPES: Record<string, string> = {
  md: 'text/markdown',
  json: 'application/json',
  html: 'text/html',
  csv: 'text/csv',
  js: 'text/javascript',
  ts: 'text/x-typescript',
  py: 'text/x-python',
};
const mediaTypeOf = (path: string): string =>
  MEDIA_TYPES[/\.([A-Za-z0-9]+)$/.exec(path)?.[1].toLowerCase() ?? ''] ?? 'text/plain';

/** A written file as an artifact: its text (a binary file is named, not included). */
export function fileArtifact(taskId: string, f: WrittenFile): Artifact {
  const filename = f.path.split('/').pop() ?? f.path;
  return {
    artifactId: fileArtifactId(taskId, f.path),
    name: f.path,
    description: 'a file the task wrote in its allowed root',
    parts: [
      f.text !== null
        ? {
            content: { $case: 'text', value: f.text },
            metadata: undefined,
            filename,
            mediaType: mediaTypeOf(f.path),
          }
        : {
            content: {
              $case: 'data',
              value: { path: f.path, bytes: f.bytes, note: 'not UTF-8 text: not included' },
            },
            metadata: undefined,
            filename,
            mediaType: 'application/json',
          },
    ],
    metadata: { runledger: { path: f.path, bytes: f.bytes, truncated: f.truncated } },
    extensions: [],
  };
}

/** Our stop reason, stop detail, usage and the log position a view stands at, in A2A metadata. */
export const runledgerMetadata = (view: TaskView): { runledger: Record<string, unknown> } => ({
  runledger: {
    status: view.status,
    stop_reason: view.stop_reason,
    stop_detail: view.stop_detail,
    usage: view.usage,
    last_seq: view.last_seq,
  },
});

export interface TaskInput {
  /** the task's whole input, as TASK_RECEIVED holds it */
  input: string;
  /** the message it came as: the idempotency key's message id, when one was given */
  message_id: string | null;
}

/**
 * A view as an A2A Task. History: the input, then the answer once there is one; `historyLength`
 * keeps the latest that many (0: none; absent: all).
 */
export function a2aTaskOf(
  view: TaskView,
  input: TaskInput,
  options: {
    pending?: readonly PendingRequestView[];
    historyLength?: number;
    artifacts?: boolean;
    /** the files the task wrote, after its answer */
    files?: readonly Artifact[];
  } = {},
): Task {
  const history: Message[] = [
    {
      messageId: input.message_id ?? `${view.task_id}:input`,
      contextId: view.session_id,
      taskId: view.task_id,
      role: Role.ROLE_USER,
      parts: [textPart(input.input)],
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    },
    ...(view.result !== null
      ? [agentMessage(`${view.task_id}:answer`, view.task_id, view.session_id, [textPart(view.result)])]
      : []),
  ];
  const keep = options.historyLength;
  return {
    id: view.task_id,
    contextId: view.session_id,
    status: a2aStatusOf(view, options.pending ?? view.pending),
    artifacts:
      options.artifacts === false
        ? []
        : [
            ...(view.result === null ? [] : [resultArtifact(view.task_id, view.result)]),
            ...(options.files ?? []),
          ],
    history: keep === undefined ? history : keep <= 0 ? [] : history.slice(-keep),
    metadata: runledgerMetadata(view),
  };
}

/** A2A's message id as the idempotency key of the task it submits (prefixed: not to meet POST /tasks keys). */
export const idempotencyKeyOf = (messageId: string): string => `a2a:${messageId}`;
export const messageIdOfKey = (key: string | null): string | null =>
  key?.startsWith('a2a:') ? key.slice('a2a:'.length) : null;

const MAX_INPUT_CHARS = 200_000;

/** A new task's input from a message: its text parts, then its data parts as JSON. Files are not taken. */
export function inputOfMessage(message: Message | undefined): string {
  if (!message) throw new RequestMalformedError('message is required');
  if (!message.messageId) throw new RequestMalformedError('message.messageId is required');
  if (message.parts.length === 0) throw new RequestMalformedError('message.parts is empty');
  const pieces: string[] = [];
  for (const [i, part] of message.parts.entries()) {
    const c = part.content;
    if (c?.$case === 'text') pieces.push(c.value);
    else if (c?.$case === 'data') pieces.push(JSON.stringify(c.value));
    else
      throw new RequestMalformedError(
        `message.parts[${i}]: ${c ? `${c.$case} parts are not accepted` : 'a part needs text or data'}; send text or data`,
      );
  }
  const input = pieces.join('\n');
  if (input.trim() === '') throw new RequestMalformedError('message has no text');
  if (input.length > MAX_INPUT_CHARS)
    throw new RequestMalformedError(`message text is longer than ${MAX_INPUT_CHARS} characters`);
  return input;
}

export type Answer =
  | {
      kind: 'permission';
      request_id: string;
      decision: PermissionDecision;
      content?: Record<string, unknown>;
    }
  | { kind: 'secret'; request_id: string; secret: string };

/** The answer a message to a waiting task carries: its data part `{request_id, decision}` or `{request_id, secret}`. */
export function answerOfMessage(message: Message): Answer {
  const data = message.parts
    .map((p) => (p.content?.$case === 'data' ? (p.content.value as unknown) : null))
    .find((v): v is Record<string, unknown> => typeof v === 'object' && v !== null && 'request_id' in v);
  if (!data)
    throw new RequestMalformedError(
      'a message to a task waiting for input needs a data part {request_id, decision} (permission) or {request_id, secret}',
    );
  const requestId = data.request_id;
  if (typeof requestId !== 'string' || requestId === '')
    throw new RequestMalformedError('request_id must be a non-empty string');
  if ('secret' in data) {
    if (typeof data.secret !== 'string' || data.secret === '')
      throw new RequestMalformedError('secret must be a non-empty string');
    return { kind: 'secret', request_id: requestId, secret: data.secret };
  }
  const decision = PermissionDecision.safeParse(data.decision);
  if (!decision.success)
    throw new RequestMalformedError(`decision must be one of ${PermissionDecision.options.join(', ')}`);
  const content = data.content;
  if (content !== undefined && (typeof content !== 'object' || content === null || Array.isArray(content)))
    throw new RequestMalformedError('content must be an object');
  return {
    kind: 'permission',
    request_id: requestId,
    decision: decision.data,
    ...(content ? { content: content as Record<string, unknown> } : {}),
  };
}

/** The A2A updates one event brings, given the task's state before it. */
export interface UpdateStep {
  state: OurTaskState;
  updates: StreamResponse[];
}

const statusKey = (v: TaskView): string =>
  `${a2aStateOf(v.status, v.stop_reason, v.usage.rounds)}:${v.pending.map((p) => p.request_id).join(',')}`;

/**
 * The stream of a task's A2A updates, one event at a time: a status update whenever the A2A state
 * (or what is asked) changes, and at the end the answer as an artifact before the final status.
 * Each update names the event it stands for in `metadata.runledger.seq`.
 */
export function a2aUpdateStep(before: OurTaskState | null, e: RuntimeEvent): UpdateStep {
  const state = evolve(before, e);
  const view = taskViewFromState(state);
  const prior = before ? taskViewFromState(before) : null;
  if (prior && statusKey(prior) === statusKey(view)) return { state, updates: [] };
  const metadata = { runledger: { seq: e.sequence, event_type: e.type } };
  const updates: StreamResponse[] = [];
  if (isFinalEventType(e.type) && view.result !== null)
    updates.push({
      payload: {
        $case: 'artifactUpdate',
        value: {
          taskId: view.task_id,
          contextId: view.session_id,
          artifact: resultArtifact(view.task_id, view.result),
          append: false,
          lastChunk: true,
          metadata,
        },
      },
    });
  updates.push({
    payload: {
      $case: 'statusUpdate',
      value: {
        taskId: view.task_id,
        contextId: view.session_id,
        status: a2aStatusOf(view, view.pending),
        metadata: { runledger: { ...runledgerMetadata(view).runledger, ...metadata.runledger } },
      },
    },
  });
  return { state, updates };
}

/** Every update of the task's events after `afterSeq` (the state folds from the first event). */
export function a2aUpdatesOf(
  events: readonly RuntimeEvent[],
  afterSeq = 0,
): { seq: number; update: StreamResponse }[] {
  const out: { seq: number; update: StreamResponse }[] = [];
  let state: OurTaskState | null = null;
  for (const e of events) {
    const step = a2aUpdateStep(state, e);
    state = step.state;
    if (e.sequence > afterSeq) for (const update of step.updates) out.push({ seq: e.sequence, update });
  }
  return out;
}

export const isEndState = (s: TaskState): boolean =>
  s === TaskState.TASK_STATE_COMPLETED ||
  s === TaskState.TASK_STATE_FAILED ||
  s === TaskState.TASK_STATE_CANCELED ||
  s === TaskState.TASK_STATE_REJECTED;

/** A state a blocking SendMessage returns at: the task ended or waits for an answer. */
export const isRestingState = (s: TaskState): boolean =>
  isEndState(s) || s === TaskState.TASK_STATE_INPUT_REQUIRED || s === TaskState.TASK_STATE_AUTH_REQUIRED;
