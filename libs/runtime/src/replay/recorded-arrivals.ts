import { NewEvent, RuntimeEvent } from '@runledger/contracts';
import type { ExpectedSequence } from '@runledger/event-store';
import { reproducedInReplay } from './reproduced-in-replay';

/** One event another writer appended to the recorded task while it ran or waited, and where it landed. */
interface Arrival {
  /** how many of the task's reproduced events came before it */
  after: number;
  event: NewEvent;
  /**
   * the run noticed it before writing anything more (its next event is the end it caused): it is
   * written as soon as the replayed log is there. Otherwise the run appended on without having
   * seen it, and it is written just before that append, which then meets it as the live one did.
   */
  noticed: boolean;
}

/**
 * What reached the recorded task from outside its run, written again into the replay's log where the
 * recording has it: a newer message's interrupt (INTERRUPT_REQUESTED) and a cancel (the rollback of a
 * newer message, a person's request), whose TASK_CANCELLED another writer appended, and a signal sent
 * while no wait for it stood (SIGNAL_RECEIVED, kept until a wait takes it). The run meets them
 * as it met them live (folded in at its safe point, or as a conflict that rebases its append), so an
 * interrupted or cancelled task replays to the same end. Positions count reproduced events only
 * (reproducedInReplay), the only ones a replay writes.
 */
export class RecordedArrivals {
  /** the replayed task's stream: the first one a TASK_RECEIVED starts in the replay's log */
  private taskId: string | null = null;

  private constructor(private readonly pending: Arrival[]) {}

  static fromEvents(events: readonly RuntimeEvent[]): RecordedArrivals {
    const reproduced = events.filter(reproducedInReplay);
    const pending: Arrival[] = [];
    reproduced.forEach((e, i) => {
      const next = reproduced[i + 1];
      if (e.type === 'INTERRUPT_REQUESTED')
        pending.push({
          after: i,
          event: { type: e.type, session_id: e.session_id, payload: e.payload },
          noticed: next?.type === 'TASK_CANCELLED' && next.payload.stop_reason === 'interrupted',
        });
      // an end asked for from outside: the run that was aborted by it writes nothing after it
      else if (e.type === 'TASK_CANCELLED' && e.payload.stop_reason === 'cancelled')
        pending.push({
          after: i,
          event: { type: e.type, session_id: e.session_id, payload: e.payload },
          noticed: true,
        });
      // a signal no wait took in its sender's commit was kept: the run met it on its next append
      else if (e.type === 'SIGNAL_RECEIVED' && !takenOnArrival(next))
        pending.push({
          after: i,
          event: { type: e.type, session_id: e.session_id, payload: e.payload },
          noticed: false,
        });
    });
    return new RecordedArrivals(pending);
  }

  /**
   * What is written before an append of `events` to `taskId` that expects the stream at `expected`
   * (the append then meets it as a conflict). An end asked for from outside that falls inside the
   * batch comes after the part of it the recording has before the end: the run that was stopped there
   * live wrote no more, and the replayed run, stopped by that end, writes nothing further either.
   */
  before(taskId: string, events: readonly NewEvent[], expected: ExpectedSequence): NewEvent[] {
    if (this.taskId === null && expected === 'no_stream' && events[0]?.type === 'TASK_RECEIVED')
      this.taskId = taskId;
    if (taskId !== this.taskId || typeof expected !== 'number') return [];
    const [first] = this.pending;
    if (!first) return [];
    if (!first.noticed && first.after === expected) return this.take();
    if (isEnd(first) && first.after >= expected && first.after < expected + events.length)
      // copies under ids of their own: the batch itself is then refused whole, as a conflict
      return [
        ...events.slice(0, first.after - expected).map(({ event_id: _id, ...e }) => e as NewEvent),
        ...this.take(),
      ];
    return [];
  }

  /** What is written once the replayed stream holds `version` events. */
  after(taskId: string, version: number): NewEvent[] {
    const [first] = this.pending;
    if (taskId !== this.taskId || !first?.noticed || first.after !== version) return [];
    return this.take();
  }

  private take(): NewEvent[] {
    return [this.pending.shift()!.event];
  }
}

const isEnd = (a: Arrival): boolean => a.event.type === 'TASK_CANCELLED';

/**
 * Whether a signal was taken by a waiting task in the commit that recorded it (its sender delivered
 * it: `next`, the event after its SIGNAL_RECEIVED, is the SIGNAL_DELIVERED). A replay sends such a
 * signal again when its wait stands (see recordedAnswers); any other is a recorded arrival.
 */
export const takenOnArrival = (next: RuntimeEvent | undefined): next is RuntimeEvent<'SIGNAL_DELIVERED'> =>
  next?.type === 'SIGNAL_DELIVERED';
