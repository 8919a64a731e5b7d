import {
  AgentCard,
  CancelTaskRequest,
  DeleteTaskPushNotificationConfigRequest,
  GetTaskPushNotificationConfigRequest,
  GetTaskRequest,
  ListTaskPushNotificationConfigsRequest,
  ListTaskPushNotificationConfigsResponse,
  ListTasksRequest,
  ListTasksResponse,
  Message,
  SendMessageRequest,
  StreamResponse,
  SubscribeToTaskRequest,
  Task,
  TaskPushNotificationConfig,
} from '@a2a-js/sdk';
import {
  ExtendedAgentCardNotConfiguredError,
  RequestMalformedError,
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from '@a2a-js/sdk/errors';
import type { A2ARequestHandler, ServerCallContext, User } from '@a2a-js/sdk/server';
import {
  IdempotencyConflictError,
  IllegalStateError,
  NotFoundError,
  RuntimeEvent,
  ValidationError,
  isFinalEventType,
  isTerminalStatus,
  sha256,
} from '@runledger/contracts';
import { Artifact } from '@a2a-js/sdk';
import { EventStore } from '@runledger/event-store';
import {
  PendingRequestView,
  RuntimeController,
  TaskTree,
  TaskView,
  TaskViews,
  taskViewFromState,
} from '@runledger/runtime';
import { TaskState as OurTaskState } from '@runledger/state-store';
import { OutboundDeliveries } from '../outbound/outbound-deliveries';
import { CallbackState } from '../outbound/outbox';
import { EventSource } from '../streaming/follow-events';
import {
  TaskInput,
  a2aStateOf,
  a2aTaskOf,
  a2aUpdateStep,
  answerOfMessage,
  idempotencyKeyOf,
  inputOfMessage,
  isEndState,
  isRestingState,
  messageIdOfKey,
  personRequests,
  statusFilterOf,
} from './a2a-mapping';
import { WrittenFileArtifacts } from './written-file-artifacts';
import { followTask } from './task-follow';

/** The caller as the SDK carries it: who it is, and a signal that fires when its connection closes. */
export class A2ACaller implements User {
  constructor(
    readonly name: string,
    readonly scopes: readonly string[],
    readonly closed: AbortSignal,
  ) {}

  get isAuthenticated(): boolean {
    return true;
  }

  get userName(): string {
    return this.name;
  }
}

const closedSignalOf = (context: ServerCallContext): AbortSignal | null =>
  context.user instanceof A2ACaller ? context.user.closed : null;

export interface A2AHandlerDeps {
  runtime: RuntimeController;
  tasks: TaskViews;
  tree: TaskTree;
  store: EventStore;
  events: EventSource;
  outbound: OutboundDeliveries;
  card: () => AgentCard;
  /** the card a caller with a token gets */
  extendedCard: (caller: { name: string; scopes: readonly string[] }) => AgentCard;
  /** the files the task wrote, as artifacts */
  files: WrittenFileArtifacts;
}

const LIST_PAGE_MAX = 100;
const LIST_PAGE_DEFAULT = 50;

/** Runledger's errors as A2A's: bad input is invalid params, an unknown task is TaskNotFound. */
function asA2AError(err: unknown): unknown {
  if (err instanceof NotFoundError) return new TaskNotFoundError(err.message);
  if (
    err instanceof ValidationError ||
    err instanceof IdempotencyConflictError ||
    err instanceof IllegalStateError
  )
    return new RequestMalformedError(err.message);
  return err;
}

async function translated<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    throw asA2AError(err);
  }
}

/**
 * A2A 1.0 over the runtime: every method is a RuntimeController call or a read of the log and the
 * task views; streams are the log followed from a sequence, so a reconnect, a restart or another
 * instance serves the same updates. Nothing is kept here between requests.
 */
export class RunledgerA2AHandler implements A2ARequestHandler {
  constructor(private readonly deps: A2AHandlerDeps) {}

  getAgentCard(): Promise<AgentCard> {
    return Promise.resolve(this.deps.card());
  }

  getAuthenticatedExtendedAgentCard(_params: unknown, context: ServerCallContext): Promise<AgentCard> {
    // the guard let no request without a token through; the caller is who its token names
    const caller = context.user instanceof A2ACaller ? context.user : null;
    if (!caller)
      return Promise.reject(new ExtendedAgentCardNotConfiguredError('no caller to build the card for'));
    return Promise.resolve(this.deps.extendedCard(caller));
  }

  sendMessage(params: SendMessageRequest): Promise<Message | Task> {
    return translated(async () => {
      const taskId = await this.accept(params);
      if (params.configuration?.returnImmediately) return this.task(taskId);
      // blocking: answer once the task ended or waits for an answer
      const view = await this.requireView(taskId);
      const state = a2aStateOf(view.status, view.stop_reason, view.usage.rounds);
      if (!isRestingState(state)) {
        for await (const update of this.updates(taskId, view.last_seq, null)) {
          const s = update.payload?.$case === 'statusUpdate' ? update.payload.value.status?.state : undefined;
          if (s !== undefined && isRestingState(s)) break;
        }
      }
      return this.task(taskId, params.configuration?.historyLength);
    });
  }

  async *sendMessageStream(
    params: SendMessageRequest,
    context: ServerCallContext,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    const taskId = await translated(() => this.accept(params));
    // the stream ends when the task ends or waits for an answer (the answer is a new message)
    yield* this.snapshotThenUpdates(taskId, closedSignalOf(context), isRestingState);
  }

  async *resubscribe(
    params: SubscribeToTaskRequest,
    context: ServerCallContext,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    const view = await translated(() => this.requireView(params.id));
    if (isTerminalStatus(view.status))
      throw new UnsupportedOperationError(`task ${params.id} has ended (${view.status}); GetTask reads it`);
    yield* this.snapshotThenUpdates(params.id, closedSignalOf(context), isEndState);
  }

  getTask(params: GetTaskRequest): Promise<Task> {
    return translated(async () => {
      if (params.historyLength !== undefined && params.historyLength < 0)
        throw new RequestMalformedError('historyLength must not be negative');
      return this.task(params.id, params.historyLength);
    });
  }

  listTasks(params: ListTasksRequest): Promise<ListTasksResponse> {
    return translated(async () => {
      const pageSize = params.pageSize ?? LIST_PAGE_DEFAULT;
      if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > LIST_PAGE_MAX)
        throw new RequestMalformedError(`pageSize must be between 1 and ${LIST_PAGE_MAX}`);
      if (params.historyLength !== undefined && params.historyLength < 0)
        throw new RequestMalformedError('historyLength must not be negative');
      const after = params.statusTimestampAfter ? Date.parse(params.statusTimestampAfter) : null;
      if (after !== null && Number.isNaN(after))
        throw new RequestMalformedError('statusTimestampAfter must be an ISO 8601 time');
      const filter = {
        status: statusFilterOf(params.status) ?? undefined,
        session_id: params.contextId || undefined,
      };
      const keep = (v: TaskView) => after === null || Date.parse(v.updated_at) > after;
      const page = await this.deps.tasks.list({
        ...filter,
        limit: pageSize,
        cursor: params.pageToken || undefined,
      });
      const tasks = await Promise.all(
        page.tasks.filter(keep).map(async (v) =>
          a2aTaskOf(v, await this.inputOf(v.task_id), {
            historyLength: params.historyLength,
            artifacts: params.includeArtifacts === true,
            files: params.includeArtifacts === true ? await this.fileArtifacts(v.task_id) : [],
          }),
        ),
      );
      return {
        tasks,
        nextPageToken: page.next_cursor ?? '',
        pageSize,
        totalSize: await this.count(filter, keep),
      };
    });
  }

  cancelTask(params: CancelTaskRequest): Promise<Task> {
    return translated(async () => {
      const view = await this.requireView(params.id);
      if (isTerminalStatus(view.status))
        throw new TaskNotCancelableError(`task ${params.id} has ended (${view.status})`);
      await this.deps.runtime.cancel(params.id);
      return this.task(params.id);
    });
  }

  createTaskPushNotificationConfig(params: TaskPushNotificationConfig): Promise<TaskPushNotificationConfig> {
    return translated(async () => {
      await this.requireView(params.taskId);
      checkCallbackUrl(params.url);
      if (params.authentication?.credentials)
        throw new RequestMalformedError(
          'authentication credentials are not kept (they would be in the log); give a token, and check the signature',
        );
      const c = await this.deps.outbound.register({
        task_id: params.taskId,
        url: params.url,
        token: params.token || null,
        format: 'a2a',
        ...(params.id ? { callback_id: params.id } : {}),
      });
      return configOf(params.taskId, c);
    });
  }

  getTaskPushNotificationConfig(
    params: GetTaskPushNotificationConfigRequest,
  ): Promise<TaskPushNotificationConfig> {
    return translated(async () => {
      await this.requireView(params.taskId);
      const c = (await this.deps.outbound.callbacks(params.taskId)).find((x) => x.callback_id === params.id);
      if (!c)
        throw new TaskNotFoundError(`task ${params.taskId} has no push notification config ${params.id}`);
      return configOf(params.taskId, c);
    });
  }

  listTaskPushNotificationConfigs(
    params: ListTaskPushNotificationConfigsRequest,
  ): Promise<ListTaskPushNotificationConfigsResponse> {
    return translated(async () => {
      await this.requireView(params.taskId);
      const configs = (await this.deps.outbound.callbacks(params.taskId))
        .filter((c) => c.format === 'a2a')
        .map((c) => configOf(params.taskId, c));
      return { configs, nextPageToken: '' };
    });
  }

  deleteTaskPushNotificationConfig(params: DeleteTaskPushNotificationConfigRequest): Promise<void> {
    return translated(async () => {
      await this.requireView(params.taskId);
      if (!(await this.deps.outbound.remove(params.taskId, params.id)))
        throw new TaskNotFoundError(`task ${params.taskId} has no push notification config ${params.id}`);
    });
  }

  /**
   * A message either starts a task (no taskId: its messageId is the idempotency key, its contextId
   * the session) or answers the request a waiting task asked (taskId: a data part names it).
   */
  private async accept(params: SendMessageRequest): Promise<string> {
    const message = params.message;
    if (!message) throw new RequestMalformedError('message is required');
    if (message.taskId) {
      await this.answer(message.taskId, message);
      return message.taskId;
    }
    const input = inputOfMessage(message);
    const { task_id } = await this.deps.runtime.submit(
      { input, ...(message.contextId ? { session_id: message.contextId } : {}) },
      { idempotency_key: idempotencyKeyOf(message.messageId), source: 'api' },
    );
    const push = params.configuration?.taskPushNotificationConfig;
    if (push) {
      checkCallbackUrl(push.url);
      // derived from the message: a message sent again registers the same callback once
      const callback_id = push.id || `cb_${sha256(`${task_id}:${message.messageId}`).slice(0, 24)}`;
      const known = (await this.deps.outbound.callbacks(task_id)).some((c) => c.callback_id === callback_id);
      if (!known)
        await this.deps.outbound.register({
          task_id,
          url: push.url,
          token: push.token || null,
          format: 'a2a',
          callback_id,
          from_seq: 0,
        });
    }
    return task_id;
  }

  private async answer(taskId: string, message: Message): Promise<void> {
    const view = await this.requireView(taskId);
    if (isTerminalStatus(view.status))
      throw new UnsupportedOperationError(
        `task ${taskId} has ended (${view.status}); send a new message in its context (contextId ${view.session_id})`,
      );
    const answer = answerOfMessage(message);
    const pending = await this.pendingOf(view);
    const asked = pending.find((p) => p.request_id === answer.request_id);
    if (!asked)
      throw new RequestMalformedError(
        `task ${taskId} is not waiting for request ${answer.request_id} (pending: ${pending.map((p) => p.request_id).join(', ') || 'none'})`,
      );
    if (asked.kind !== answer.kind)
      throw new RequestMalformedError(
        `request ${answer.request_id} asks for ${asked.kind === 'permission' ? 'a decision' : 'a secret'}`,
      );
    if (answer.kind === 'permission')
      await this.deps.runtime.resolvePermission(
        asked.task_id,
        asked.request_id,
        answer.decision,
        answer.content,
      );
    else await this.deps.runtime.provideSecret(asked.task_id, asked.request_id, answer.secret);
  }

  /** A Task as it stands, then an update per change, until `stopAt` (or the client leaves). */
  private async *snapshotThenUpdates(
    taskId: string,
    closed: AbortSignal | null,
    stopAt: (s: ReturnType<typeof a2aStateOf>) => boolean,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    const events = await this.deps.store.readWholeStream(taskId);
    if (events[0]?.type !== 'TASK_RECEIVED') throw new TaskNotFoundError(`task ${taskId} not found`);
    const state = events.reduce<OurTaskState | null>((s, e) => a2aUpdateStep(s, e).state, null)!;
    // the snapshot is the fold of the events read, so the updates go on from exactly there
    const view = taskViewFromState(state);
    const task = a2aTaskOf(view, inputFrom(events[0]), {
      pending: await this.pendingOf(view),
      files: await this.fileArtifacts(taskId),
    });
    yield { payload: { $case: 'task', value: task } };
    if (stopAt(task.status!.state)) return;
    for await (const update of this.updates(taskId, state.last_seq, closed, state)) {
      yield update;
      const s = update.payload?.$case === 'statusUpdate' ? update.payload.value.status?.state : undefined;
      if (s !== undefined && stopAt(s)) return;
    }
  }

  /** The task's A2A updates from the events after `afterSeq`, live. */
  private async *updates(
    taskId: string,
    afterSeq: number,
    closed: AbortSignal | null,
    from?: OurTaskState,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    let state: OurTaskState | null =
      from ??
      (await this.deps.store.readStream(taskId, { limit: afterSeq })).reduce<OurTaskState | null>(
        (s, e) => a2aUpdateStep(s, e).state,
        null,
      );
    for await (const e of followTask(this.deps.events, taskId, afterSeq, closed)) {
      const step = a2aUpdateStep(state, e);
      state = step.state;
      // at the end the written files come as artifacts too, before the final status
      if (isFinalEventType(e.type))
        for (const artifact of await this.fileArtifacts(taskId))
          yield {
            payload: {
              $case: 'artifactUpdate',
              value: {
                taskId,
                contextId: state.session_id,
                artifact,
                append: false,
                lastChunk: true,
                metadata: { runledger: { seq: e.sequence, event_type: e.type } },
              },
            },
          };
      yield* step.updates;
    }
  }

  private async task(taskId: string, historyLength?: number): Promise<Task> {
    const view = await this.requireView(taskId);
    return a2aTaskOf(view, await this.inputOf(taskId), {
      historyLength,
      pending: await this.pendingOf(view),
      files: await this.fileArtifacts(taskId),
    });
  }

  private fileArtifacts(taskId: string): Promise<Artifact[]> {
    return this.deps.files.of(taskId);
  }

  /** The task's own pending requests, or, while it waits on a task it delegated to, that task's. */
  private async pendingOf(view: TaskView): Promise<PendingRequestView[]> {
    const own = personRequests(view.pending);
    return own.length > 0 ? own : personRequests(await this.deps.tree.descendantsPending(view.task_id));
  }

  private async requireView(taskId: string): Promise<TaskView> {
    if (!taskId) throw new RequestMalformedError('a task id is required');
    const view = await this.deps.tasks.get(taskId);
    if (!view) throw new TaskNotFoundError(`task ${taskId} not found`);
    return view;
  }

  private async inputOf(taskId: string): Promise<TaskInput> {
    const [first] = await this.deps.store.readStream(taskId, { limit: 1 });
    return inputFrom(first);
  }

  /** every task the filter matches (ListTasks' totalSize), a projection page at a time */
  private async count(
    filter: { status?: TaskView['status']; session_id?: string },
    keep: (v: TaskView) => boolean,
  ): Promise<number> {
    let n = 0;
    for (let cursor: string | undefined; ;) {
      const page = await this.deps.tasks.list({ ...filter, limit: 500, cursor });
      n += page.tasks.filter(keep).length;
      if (!page.next_cursor) return n;
      cursor = page.next_cursor;
    }
  }
}

function inputFrom(first: RuntimeEvent | undefined): TaskInput {
  if (first?.type !== 'TASK_RECEIVED') throw new NotFoundError('task not found');
  return { input: first.payload.input, message_id: messageIdOfKey(first.payload.idempotency_key) };
}

function checkCallbackUrl(url: string): void {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new RequestMalformedError(`push notification url ${JSON.stringify(url)} is not a URL`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw new RequestMalformedError('push notification url must be http(s)');
}

const configOf = (taskId: string, c: CallbackState): TaskPushNotificationConfig => ({
  tenant: '',
  id: c.callback_id,
  taskId,
  url: c.url,
  token: c.token ?? '',
  authentication: undefined,
});
