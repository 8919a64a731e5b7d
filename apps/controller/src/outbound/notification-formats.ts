import { Artifact, StreamResponse } from '@a2a-js/sdk';
import { RuntimeEvent, isFinalEventType } from '@runledger/contracts';
import { taskViewFromState } from '@runledger/runtime';
import { TaskState, evolve } from '@runledger/state-store';
import { a2aTaskOf, a2aUpdateStep, messageIdOfKey } from '../a2a/a2a-mapping';
import { CallbackFormat, Notification } from './outbox';

/**
 * What a callback is told, per format, from the task's events: one notification per event that
 * changes what the receiver sees, keyed by that event's sequence (the delivery cursor). `files`:
 * the artifacts of the files the task wrote, which the final A2A Task carries.
 */
export function notificationsOf(
  format: CallbackFormat,
  events: readonly RuntimeEvent[],
  files: readonly Artifact[] = [],
): Notification[] {
  return format === 'a2a' ? a2aNotificationsOf(events, files) : statusNotificationsOf(events);
}

/**
 * A2A push notifications: each status update as a StreamResponse; at the end the whole task (its
 * answer and the files it wrote as artifacts, its final status) as one `task` StreamResponse.
 */
function a2aNotificationsOf(events: readonly RuntimeEvent[], files: readonly Artifact[]): Notification[] {
  const [first] = events;
  if (first?.type !== 'TASK_RECEIVED') return [];
  const out: Notification[] = [];
  let state: TaskState | null = null;
  for (const e of events) {
    const step = a2aUpdateStep(state, e);
    state = step.state;
    if (step.updates.length === 0) continue;
    // the end is always the whole task: its answer and files, whichever way it ended
    const update: StreamResponse =
      step.updates.length === 1 && !isFinalEventType(e.type)
        ? step.updates[0]
        : {
            payload: {
              $case: 'task',
              value: a2aTaskOf(
                taskViewFromState(state),
                {
                  input: first.payload.input,
                  message_id: messageIdOfKey(first.payload.idempotency_key),
                },
                { files },
              ),
            },
          };
    out.push({ seq: e.sequence, body: StreamResponse.toJSON(update) });
  }
  return out;
}

/** Runledger's own callbacks: the task's status whenever it changes, with the answer at the end. */
function statusNotificationsOf(events: readonly RuntimeEvent[]): Notification[] {
  const out: Notification[] = [];
  let state: TaskState | null = null;
  for (const e of events) {
    const before = state;
    state = evolve(state, e);
    const pendingIds = (s: TaskState | null) => s?.pending_requests.map((p) => p.request_id).join(',');
    if (before && before.status === state.status && pendingIds(before) === pendingIds(state)) continue;
    const view = taskViewFromState(state);
    out.push({
      seq: e.sequence,
      body: {
        task_id: view.task_id,
        session_id: view.session_id,
        sequence: e.sequence,
        event_type: e.type,
        status: view.status,
        stop_reason: view.stop_reason,
        result: view.result,
        pending: view.pending,
        usage: view.usage,
      },
    });
  }
  return out;
}
