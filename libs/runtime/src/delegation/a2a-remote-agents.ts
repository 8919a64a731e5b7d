import { readFileSync } from 'node:fs';
import type { AgentCard, Message, Part, StreamResponse, Task, TaskState, TaskStatus } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import {
  AgentProfile,
  RemoteAgentLink,
  RemoteTaskState,
  TaskUsage,
  remoteAgentAddress,
} from '@runledger/contracts';
import { sleep } from '../model/model-backend';
import {
  RemoteAgents,
  RemoteAnswer,
  RemoteCall,
  RemoteSnapshot,
  RemoteStep,
  isRemoteEnd,
  remoteChanged,
} from './remote-agents';

/** How often a remote agent that cannot be reached is tried before the delegation fails, and the pause before each retry. */
export interface RemoteRetry {
  attempts: number;
  backoffMs: number;
  maxBackoffMs: number;
}
export const DEFAULT_REMOTE_RETRY: RemoteRetry = { attempts: 5, backoffMs: 500, maxBackoffMs: 8000 };

/**
 * The A2A SDK, required when a remote agent is first asked (or its state read): a process that
 * delegates to none, every CLI command among them, does not load it.
 */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const a2aSdk = () => require('@a2a-js/sdk') as typeof import('@a2a-js/sdk');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const a2aClientSdk = () => require('@a2a-js/sdk/client') as typeof import('@a2a-js/sdk/client');

const statesOf = ({ TaskState }: typeof import('@a2a-js/sdk')): Record<TaskState, RemoteTaskState> => ({
  [TaskState.TASK_STATE_UNSPECIFIED]: 'unknown',
  [TaskState.TASK_STATE_SUBMITTED]: 'submitted',
  [TaskState.TASK_STATE_WORKING]: 'working',
  [TaskState.TASK_STATE_COMPLETED]: 'completed',
  [TaskState.TASK_STATE_FAILED]: 'failed',
  [TaskState.TASK_STATE_CANCELED]: 'canceled',
  [TaskState.TASK_STATE_INPUT_REQUIRED]: 'input-required',
  [TaskState.TASK_STATE_REJECTED]: 'rejected',
  [TaskState.TASK_STATE_AUTH_REQUIRED]: 'auth-required',
  [TaskState.UNRECOGNIZED]: 'unknown',
});
let states: Record<TaskState, RemoteTaskState> | undefined;
const stateOf = (s: TaskState | undefined): RemoteTaskState =>
  s === undefined ? 'unknown' : (states ??= statesOf(a2aSdk()))[s];

const textsOf = (parts: readonly Part[]): string[] =>
  parts.flatMap((p) => (p.content?.$case === 'text' ? [p.content.value] : []));
const dataOf = (parts: readonly Part[]): Record<string, unknown> | null => {
  for (const p of parts)
    if (p.content?.$case === 'data' && typeof p.content.value === 'object' && p.content.value !== null)
      return p.content.value as Record<string, unknown>;
  return null;
};

/**
 * An artifact's part as the parent records it: text as it is, data as JSON, a file by its name, type
 * and size or URL (its bytes stay with the remote agent, out of the log).
 */
export function artifactPartText(p: Part): string {
  const c = p.content;
  switch (c?.$case) {
    case 'text':
      return c.value;
    case 'data':
      return JSON.stringify(c.value);
    case 'raw':
      return `[file ${p.filename || 'unnamed'} (${p.mediaType || 'application/octet-stream'}, ${c.value.length} bytes)]`;
    case 'url':
      return `[file ${p.filename || 'unnamed'} (${p.mediaType || 'unknown type'}) at ${c.value}]`;
    default:
      return '';
  }
}

/** What identifies the question a status asks: its data part's request_id, else its message. */
function askIdOf(taskId: string, status: TaskStatus | undefined): string | null {
  const state = stateOf(status?.state);
  if (state !== 'input-required' && state !== 'auth-required') return null;
  const data = status?.message ? dataOf(status.message.parts) : null;
  if (typeof data?.request_id === 'string' && data.request_id !== '') return data.request_id;
  return status?.message?.messageId || `${taskId}:${state}:${status?.timestamp ?? ''}`;
}

/** An A2A task as its parent records it. */
export function remoteSnapshotOf(task: Task): RemoteSnapshot {
  const status = task.status;
  const message = status?.message;
  const texts = message ? textsOf(message.parts) : [];
  const askId = askIdOf(task.id, status);
  const own = (task.metadata as { runledger?: { stop_reason?: unknown; usage?: unknown } } | undefined)
    ?.runledger;
  const usage = TaskUsage.safeParse(own?.usage);
  return {
    remote_task_id: task.id,
    context_id: task.contextId,
    state: stateOf(status?.state),
    message: texts.length > 0 ? texts.join('\n') : null,
    request: askId === null ? null : { ask_id: askId, data: message ? dataOf(message.parts) : null },
    artifacts: task.artifacts.map((a) => ({
      artifact_id: a.artifactId,
      name: a.name,
      text: a.parts.map(artifactPartText).join('\n'),
    })),
    stop_reason: typeof own?.stop_reason === 'string' ? own.stop_reason : null,
    usage: usage.success ? usage.data : null,
  };
}

/** An agent's direct reply (a message, no task) as a completed remote task. */
function repliedSnapshot(m: Message, call: RemoteCall): RemoteSnapshot {
  const text = textsOf(m.parts).join('\n');
  return {
    remote_task_id: m.taskId || m.messageId,
    context_id: m.contextId || call.context_id,
    state: 'completed',
    message: text,
    request: null,
    artifacts: [],
    stop_reason: null,
    usage: null,
  };
}

const text = (value: string): Part => ({
  content: { $case: 'text', value },
  metadata: undefined,
  filename: '',
  mediaType: 'text/plain',
});
const data = (value: Record<string, unknown>): Part => ({
  content: { $case: 'data', value },
  metadata: undefined,
  filename: '',
  mediaType: 'application/json',
});
const userMessage = (messageId: string, contextId: string, taskId: string, parts: Part[]): Message => ({
  messageId,
  contextId,
  taskId,
  role: a2aSdk().Role.ROLE_USER,
  parts,
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
});
const sendRequest = (message: Message) => ({
  tenant: '',
  message,
  // the parent follows the task itself; a blocking send could hold the request for as long as the task runs
  configuration: {
    acceptedOutputModes: [],
    taskPushNotificationConfig: undefined,
    returnImmediately: true,
  },
  metadata: undefined,
});

/** A failure worth another try: the agent could not be reached, or answered 5xx / 429. */
export function isTransient(err: unknown): boolean {
  // the SDK may wrap the fetch error: the whole cause chain is looked at
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (
      typeof code === 'string' &&
      /^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|EHOSTUNREACH|UND_ERR_SOCKET|UND_ERR_CONNECT_TIMEOUT)$/.test(
        code,
      )
    )
      return true;
    if (
      /fetch failed|Status: (5\d\d|429)\b|Agent Card from .*: (5\d\d|429)\b|terminated|other side closed/.test(
        e.message,
      )
    )
      return true;
  }
  return false;
}

/** The headers an agent's requests carry, read where its profile says (never recorded, never logged). */
function headersOf(link: RemoteAgentLink): Record<string, string> {
  const from = link.headers_from;
  if (!from) return {};
  let raw: string | undefined;
  if (from.startsWith('env:')) {
    raw = process.env[from.slice(4)];
    if (raw === undefined) throw new RemoteConfigError(`headers_from ${from}: the variable is not set`);
  } else {
    try {
      raw = readFileSync(from.slice(5), 'utf8');
    } catch (err) {
      throw new RemoteConfigError(`headers_from ${from}: ${(err as Error).message}`);
    }
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new RemoteConfigError(`headers_from ${from}: not a JSON object of headers`);
  }
  if (
    typeof parsed !== 'object' ||
    parsed === null ||
    Array.isArray(parsed) ||
    Object.values(parsed).some((v) => typeof v !== 'string')
  )
    throw new RemoteConfigError(`headers_from ${from}: not a JSON object of string headers`);
  return parsed as Record<string, string>;
}

/** A remote agent's profile or card that no retry can fix. */
export class RemoteConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/**
 * Remote agents over A2A 1.0 with the SDK's own client (JSON-RPC preferred, HTTP+JSON else).
 * The card is read once per agent (again after a failure); every request carries the agent's
 * headers. A message is found before it is sent: the delegation's context is its own, so a task
 * in it is the one a send before a restart started (and the same messageId would name it again).
 */
export class A2ARemoteAgents extends RemoteAgents {
  private readonly clients = new Map<string, Promise<Client>>();

  constructor(private readonly retry: RemoteRetry = DEFAULT_REMOTE_RETRY) {
    super();
  }

  open(call: RemoteCall, signal: AbortSignal): Promise<RemoteStep> {
    return this.attempt(call, signal, async (client) => {
      const found = await this.sentBefore(client, call, signal);
      if (found) return { kind: 'update', snapshot: remoteSnapshotOf(found) };
      const sent = await client.sendMessage(
        sendRequest(userMessage(call.message_id, call.context_id, '', [text(call.input)])),
        { signal },
      );
      return {
        kind: 'update',
        snapshot: 'status' in sent ? remoteSnapshotOf(sent) : repliedSnapshot(sent, call),
      };
    });
  }

  next(call: RemoteCall, after: RemoteSnapshot, signal: AbortSignal): Promise<RemoteStep> {
    return this.attempt(call, signal, async (client) => {
      for (;;) {
        // read first: a change between two subscriptions (or an ended task, which has no stream) is seen here
        const now = remoteSnapshotOf(
          await client.getTask({ tenant: '', id: after.remote_task_id, historyLength: 0 }, { signal }),
        );
        if (remoteChanged(now, after) || isRemoteEnd(now.state)) return { kind: 'update', snapshot: now };
        try {
          for await (const r of client.resubscribeTask({ tenant: '', id: after.remote_task_id }, { signal }))
            if (changedBy(r, after)) break;
        } catch (err) {
          // the task ended between the read and the subscription: it has no stream, the next read sees the end
          if (!isUnsupportedOperation(err)) throw err;
        }
        if (signal.aborted) return null;
      }
    });
  }

  answer(
    call: RemoteCall,
    after: RemoteSnapshot,
    answer: RemoteAnswer,
    index: number,
    signal: AbortSignal,
  ): Promise<RemoteStep> {
    return this.attempt(call, signal, async (client) => {
      const now = remoteSnapshotOf(
        await client.getTask({ tenant: '', id: after.remote_task_id, historyLength: 0 }, { signal }),
      );
      // answered before a restart (or no longer asking): nothing is sent twice
      if (remoteChanged(now, after)) return { kind: 'update', snapshot: now };
      const value = 'decision' in answer ? answer.decision : answer.secret;
      const parts =
        answer.request_id === null
          ? [text(value)]
          : [
              data(
                'decision' in answer
                  ? { request_id: answer.request_id, decision: answer.decision }
                  : { request_id: answer.request_id, secret: answer.secret },
              ),
            ];
      await client.sendMessage(
        sendRequest(
          userMessage(`${call.message_id}:answer:${index}`, after.context_id, after.remote_task_id, parts),
        ),
        { signal },
      );
      return null;
    }).then((sent) => sent ?? this.next(call, after, signal));
  }

  async cancel(call: RemoteCall, remoteTaskId: string | null): Promise<void> {
    const client = await this.client(call.agent);
    const id = remoteTaskId ?? (await this.sentBefore(client, call, undefined))?.id;
    if (!id) return;
    try {
      await client.cancelTask({ tenant: '', id, metadata: undefined });
    } catch (err) {
      // an ended task stays as it is
      if ((err as Error).name !== 'TaskNotCancelableError') throw err;
    }
  }

  /** The task the call's message started, if it was sent before: its context holds only that task. */
  private async sentBefore(
    client: Client,
    call: RemoteCall,
    signal: AbortSignal | undefined,
  ): Promise<Task | null> {
    try {
      const listed = await client.listTasks(
        {
          tenant: '',
          contextId: call.context_id,
          status: a2aSdk().TaskState.TASK_STATE_UNSPECIFIED,
          pageSize: 10,
          pageToken: '',
          statusTimestampAfter: undefined,
          includeArtifacts: true,
        },
        { signal },
      );
      return (
        listed.tasks.find((t) => t.history.some((m) => m.messageId === call.message_id)) ??
        listed.tasks[0] ??
        null
      );
    } catch (err) {
      // an agent without ListTasks: the messageId alone keeps a second send from starting a second task
      if (isUnsupportedOperation(err)) return null;
      throw err;
    }
  }

  /** One piece of work against the agent, retried while the agent cannot be reached. */
  private async attempt(
    call: RemoteCall,
    signal: AbortSignal,
    work: (client: Client) => Promise<RemoteStep>,
  ): Promise<RemoteStep> {
    const where = remoteAgentAddress(call.agent.a2a!);
    for (let attempt = 1; ; attempt++) {
      if (signal.aborted) return null;
      try {
        return await work(await this.client(call.agent));
      } catch (err) {
        if (signal.aborted) return null;
        this.clients.delete(call.agent.name);
        const message = (err as Error).message ?? String(err);
        if (!isTransient(err))
          return {
            kind: 'failed',
            stop_reason: 'remote_unavailable',
            error: `remote agent ${call.agent.name} at ${where}: ${message}`,
          };
        if (attempt >= this.retry.attempts)
          return {
            kind: 'failed',
            stop_reason: 'remote_unavailable',
            error: `remote agent ${call.agent.name} at ${where} could not be reached after ${attempt} attempts: ${message}`,
          };
        const pause = Math.min(this.retry.maxBackoffMs, this.retry.backoffMs * 2 ** (attempt - 1));
        await Promise.race([
          sleep(pause),
          new Promise((r) => signal.addEventListener('abort', r, { once: true })),
        ]);
      }
    }
  }

  private client(agent: AgentProfile): Promise<Client> {
    let client = this.clients.get(agent.name);
    if (!client) {
      client = connect(agent.a2a!);
      this.clients.set(agent.name, client);
      client.catch(() => this.clients.delete(agent.name));
    }
    return client;
  }
}

async function connect(link: RemoteAgentLink): Promise<Client> {
  const fetchImpl: typeof fetch = (input, init) => {
    const headers = new Headers(init?.headers);
    for (const [k, v] of Object.entries(headersOf(link))) headers.set(k, v);
    return fetch(input, { ...init, headers });
  };
  // an agent that speaks only A2A 0.3 (its card says so) is spoken to in 0.3 by the SDK's compat layer
  const legacyCompat = { enabled: true };
  const { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory, RestTransportFactory } =
    a2aClientSdk();
  const resolver = new DefaultAgentCardResolver({ fetchImpl, legacyCompat });
  const factory = new ClientFactory({
    transports: [
      new JsonRpcTransportFactory({ fetchImpl, legacyCompat }),
      new RestTransportFactory({ fetchImpl, legacyCompat }),
    ],
    preferredTransports: ['JSONRPC', 'HTTP+JSON'],
    cardResolver: resolver,
  });
  let card: AgentCard;
  try {
    card = link.card_url ? await resolver.resolve(link.card_url, '') : await resolver.resolve(link.url!);
  } catch (err) {
    if (isTransient(err) || err instanceof RemoteConfigError) throw err;
    throw new RemoteConfigError(`its agent card could not be read: ${(err as Error).message}`);
  }
  try {
    return await factory.createFromAgentCard(card);
  } catch (err) {
    throw new RemoteConfigError(
      `its agent card offers nothing this runtime speaks (A2A 1.0 or 0.3 over JSON-RPC or HTTP+JSON): ${(err as Error).message}`,
    );
  }
}

/** Whether a streamed update shows the task changed from `after` (its state, or its question). */
function changedBy(r: StreamResponse, after: RemoteSnapshot): boolean {
  const p = r.payload;
  const status =
    p?.$case === 'task' ? p.value.status : p?.$case === 'statusUpdate' ? p.value.status : undefined;
  if (!status) return false;
  const state = stateOf(status.state);
  return state !== after.state || askIdOf(after.remote_task_id, status) !== (after.request?.ask_id ?? null);
}

/** The agent's answer that it does not do this (an A2A UnsupportedOperation, or no such JSON-RPC method). */
const isUnsupportedOperation = (err: unknown): boolean =>
  /UnsupportedOperation|Method not found/i.test(`${(err as Error).name} ${(err as Error).message}`);
