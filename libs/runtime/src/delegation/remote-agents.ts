import {
  AgentProfile,
  EventPayload,
  PermissionDecision,
  RemoteTaskState,
  RuntimeEvent,
  StopReason,
  sha256,
} from '@runledger/contracts';

/** A remote agent's task as its parent records it: REMOTE_TASK_UPDATED without the call. */
export type RemoteSnapshot = Omit<EventPayload<'REMOTE_TASK_UPDATED'>, 'call_id'>;

/** One delegation to a remote agent: who it goes to, and the message that starts the remote task. */
export interface RemoteCall {
  call_id: string;
  /** a profile with `a2a` */
  agent: AgentProfile;
  message_id: string;
  context_id: string;
  input: string;
}

/** What a person answered to a remote task's question, forwarded to it. */
export type RemoteAnswer =
  { request_id: string | null; decision: PermissionDecision } | { request_id: string | null; secret: string };

/**
 * What the remote side said: the task's new state, or why the delegation fails without one (the
 * agent cannot be reached after the retries the failure taxonomy allows, its card offers nothing we
 * speak, its time ran out); null: `signal` aborted first.
 */
export type RemoteStep =
  | { kind: 'update'; snapshot: RemoteSnapshot }
  | { kind: 'failed'; stop_reason: StopReason; error: string }
  | null;

/**
 * The remote agents a delegation talks to (A2A 1.0). Implemented once over the network and once
 * over a recording, so a replay or fork never calls the remote agent.
 */
export abstract class RemoteAgents {
  /** The task the call's message started: found by its context when it was sent before, else sent now. */
  abstract open(call: RemoteCall, signal: AbortSignal): Promise<RemoteStep>;
  /** The task's next state that differs from `after` (in state or in what it asks). */
  abstract next(call: RemoteCall, after: RemoteSnapshot, signal: AbortSignal): Promise<RemoteStep>;
  /** Forwards the answer to the question `after` asked (the `index`-th of the call); then `next`. */
  abstract answer(
    call: RemoteCall,
    after: RemoteSnapshot,
    answer: RemoteAnswer,
    index: number,
    signal: AbortSignal,
  ): Promise<RemoteStep>;
  /** Cancels the remote task (one that already ended stays as it is). */
  abstract cancel(call: RemoteCall, remoteTaskId: string | null): Promise<void>;
}

/** The message and context of a delegation to a remote agent follow from the parent and call: resent, they are the same. */
export const remoteMessageIdFor = (parentTaskId: string, callId: string): string =>
  `rl-${sha256(`a2a-message:${parentTaskId}:${callId}`).slice(0, 32)}`;
export const remoteContextIdFor = (parentTaskId: string, callId: string): string =>
  `rl-ctx-${sha256(`a2a-context:${parentTaskId}:${callId}`).slice(0, 32)}`;

const END_STATES: readonly RemoteTaskState[] = ['completed', 'failed', 'canceled', 'rejected'];
export const isRemoteEnd = (s: RemoteTaskState): boolean => END_STATES.includes(s);
export const isRemoteAsking = (s: RemoteTaskState): boolean =>
  s === 'input-required' || s === 'auth-required';

/** Two snapshots differ for the parent when the state or the question does. */
export const remoteChanged = (a: RemoteSnapshot, b: RemoteSnapshot): boolean =>
  a.state !== b.state || (a.request?.ask_id ?? null) !== (b.request?.ask_id ?? null);

/**
 * The remote agents as a recording saw them: each call's updates in the order they were recorded;
 * answers and cancels go nowhere. A call the recording has no more of fails as its delegation did.
 */
export class RecordedRemoteAgents extends RemoteAgents {
  private readonly updates = new Map<string, RemoteSnapshot[]>();
  private readonly ends = new Map<string, { stop_reason: StopReason; detail: string }>();

  constructor(events: readonly RuntimeEvent[]) {
    super();
    for (const e of events)
      if (e.type === 'REMOTE_TASK_UPDATED') {
        const { call_id, ...snapshot } = e.payload;
        this.updates.set(call_id, [...(this.updates.get(call_id) ?? []), snapshot]);
      } else if (e.type === 'CHILD_TASK_ENDED') this.ends.set(e.payload.call_id, e.payload);
  }

  open(call: RemoteCall): Promise<RemoteStep> {
    return Promise.resolve(this.take(call));
  }

  next(call: RemoteCall): Promise<RemoteStep> {
    return Promise.resolve(this.take(call));
  }

  answer(call: RemoteCall): Promise<RemoteStep> {
    return Promise.resolve(this.take(call));
  }

  cancel(): Promise<void> {
    return Promise.resolve();
  }

  private take(call: RemoteCall): RemoteStep {
    const snapshot = this.updates.get(call.call_id)?.shift();
    if (snapshot) return { kind: 'update', snapshot };
    const end = this.ends.get(call.call_id);
    return {
      kind: 'failed',
      stop_reason: end?.stop_reason ?? 'validation_error',
      error:
        end?.detail ?? `the recording has no more updates of the remote task of delegation ${call.call_id}`,
    };
  }
}
