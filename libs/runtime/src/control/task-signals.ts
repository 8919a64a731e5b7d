import {
  IdempotencyConflictError,
  IllegalStateError,
  LeaseLostError,
  NewEvent,
  NotFoundError,
  SignalName,
  ValidationError,
  canonicalJson,
  newId,
} from '@runledger/contracts';
import { TaskProgress, keptSignal, pendingSignalWait } from '../log/progress';
import { TaskAnswers } from './task-answers';

/** A signal as its sender gives it. */
export interface SignalToSend {
  name: string;
  payload?: unknown;
  signal_id?: string;
}

/** A signal recorded (or found recorded under its id): the wait that took it, null while it is kept. */
export interface SignalSent {
  task_id: string;
  signal_id: string;
  name: string;
  created: boolean;
  taken_by: string | null;
}

/** the largest signal payload, as canonical JSON */
export const MAX_SIGNAL_PAYLOAD_BYTES = 65_536;
/** how often a sender decides again when the task keeps moving under it */
const SIGNAL_ATTEMPTS = 30;

/**
 * A signal for the task (`signal_id`: the sender's id for it, so a retry records it once). It is
 * recorded (SIGNAL_RECEIVED) unless the task has ended; when the task waits for a signal of this
 * name, the oldest kept one is delivered to that wait in the same commit (SIGNAL_DELIVERED), and
 * the task runs on. Every append expects the sequence it was decided on, so concurrent senders,
 * here or on other instances, each record once and a wait takes one signal: a sender that lost the
 * race reads again and decides again.
 */
export async function sendSignal(
  answers: TaskAnswers,
  progress: (taskId: string) => Promise<TaskProgress>,
  taskId: string,
  signal: SignalToSend,
): Promise<SignalSent> {
  const name = SignalName.safeParse(signal.name);
  if (!name.success)
    throw new ValidationError(`invalid signal name: ${name.error.issues[0].message}`, { field: 'name' });
  const payload = signal.payload ?? null;
  const size = Buffer.byteLength(canonicalJson(payload));
  if (size > MAX_SIGNAL_PAYLOAD_BYTES)
    throw new ValidationError(`signal payload is ${size} bytes, at most ${MAX_SIGNAL_PAYLOAD_BYTES}`, {
      field: 'payload',
    });
  const signal_id = signal.signal_id ?? newId('sig');
  for (let attempt = 1; ; attempt++) {
    const p = await progress(taskId);
    if (p.last_seq === 0) throw new NotFoundError(`task ${taskId} not found`, { task_id: taskId });
    const seen = p.signals.get(signal_id);
    if (seen) {
      if (seen.received.name !== name.data || canonicalJson(seen.received.payload) !== canonicalJson(payload))
        throw new IdempotencyConflictError(
          `signal ${signal_id} was already sent to task ${taskId} with another name or payload`,
          { task_id: taskId, signal_id },
        );
      return { task_id: taskId, signal_id, name: name.data, created: false, taken_by: seen.taken_by };
    }
    if (p.final)
      throw new IllegalStateError(`task ${taskId} already ended (${p.status}); it takes no signals`, {
        task_id: taskId,
      });
    const received: NewEvent = { type: 'SIGNAL_RECEIVED', payload: { signal_id, name: name.data, payload } };
    const wait = pendingSignalWait(p);
    const taken = wait?.name === name.data ? (keptSignal(p, name.data)?.signal_id ?? signal_id) : null;
    try {
      if (wait && taken !== null)
        await answers.recordResolution(p, [
          received,
          { type: 'SIGNAL_DELIVERED', payload: { wait_id: wait.wait_id, signal_id: taken, name: name.data } },
        ]);
      else await answers.appendIfUnchanged(p, received);
      return {
        task_id: taskId,
        signal_id,
        name: name.data,
        created: true,
        taken_by: taken === signal_id ? wait!.wait_id : null,
      };
    } catch (err) {
      // the task moved on meanwhile (its run appended, another sender or a timer got in): decide again
      if (!(err instanceof IllegalStateError || err instanceof LeaseLostError)) throw err;
      if (attempt >= SIGNAL_ATTEMPTS)
        throw new IllegalStateError(`task ${taskId} kept changing; the signal was not recorded, try again`, {
          task_id: taskId,
        });
      await new Promise((r) => setTimeout(r, Math.min(50, attempt * 5) * (0.5 + Math.random())));
    }
  }
}

/**
 * A wait that started while a signal of its name came in (the two commits crossed) holds a kept
 * signal it did not take: delivered now, so the task does not wait for a signal it already has.
 */
export async function deliverKeptSignal(answers: TaskAnswers, p: TaskProgress): Promise<void> {
  const wait = pendingSignalWait(p);
  const kept = wait && keptSignal(p, wait.name);
  if (!wait || !kept) return;
  await answers
    .recordResolution(p, {
      type: 'SIGNAL_DELIVERED',
      payload: { wait_id: wait.wait_id, signal_id: kept.signal_id, name: wait.name },
    })
    .catch((err: unknown) => {
      if (!(err instanceof IllegalStateError || err instanceof LeaseLostError)) throw err;
    });
}
