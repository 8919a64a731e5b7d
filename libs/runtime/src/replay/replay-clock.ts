import { NewEvent, RuntimeEvent } from '@runledger/contracts';
import { AppendOptions, AppendResult, InMemoryEventStore, WrappingEventStore } from '@runledger/event-store';
import { initialMeterState, meterEvolve } from '../discipline/budgets';
import { describeStop } from '../discipline/stop-reasons';
import { RunClock } from '../ports';
import { DEADLINE_PASSED } from '../loop/runtime-loop';
import type { RecordedArrivals } from './recorded-arrivals';
import { reproducedInReplay } from './reproduced-in-replay';

/**
 * A replay's clock: the time the recording stamped on the event it is at. The replay's k-th
 * event is stamped with the recording's k-th reproduced event's time, minus the time the
 * recording spent waiting for a person before it (a replay does not wait), and `now` is the time
 * of the last event written. Budgets are judged by it as they were live, so a task stopped by
 * its time budget replays to the same stop whatever the wall clock does.
 *
 * The deadline timer (`after`) fires only when the recording shows it fired (its stop is the
 * passed deadline): live, that timer can fire late, and a recording stopped by the round guard
 * instead must not be cut short in replay at the moment its timestamps crossed the deadline.
 */
export class RecordedClock implements RunClock {
  private written = 0;
  private readonly timers = new Set<{ at: number; fire: () => void }>();

  constructor(
    /** ms since the epoch, one per reproduced event (TASK_RECEIVED first), waits for a person taken out */
    private readonly times: readonly number[],
    /** the recording was stopped by its deadline timer */
    private readonly deadlineFired: boolean,
  ) {}

  static fromRecording(events: readonly RuntimeEvent[]): RecordedClock {
    let meter = initialMeterState();
    const times: number[] = [];
    for (const e of events) {
      meter = meterEvolve(meter, e);
      if (reproducedInReplay(e)) times.push(Date.parse(e.created_at) - meter.waitedMs);
    }
    const last = events[events.length - 1];
    const deadlineFired =
      last?.type === 'TASK_FAILED' &&
      last.payload.stop_reason === 'timeout' &&
      last.payload.detail === describeStop('timeout', DEADLINE_PASSED);
    return new RecordedClock(times, deadlineFired);
  }

  now(): Date {
    return new Date(this.timeOf(this.written - 1));
  }

  after(ms: number, fire: () => void): () => void {
    if (!this.deadlineFired) return () => undefined;
    const timer = { at: this.now().getTime() + ms, fire };
    this.timers.add(timer);
    return () => this.timers.delete(timer);
  }

  /** The timestamps of the next `count` events. */
  stamps(count: number): string[] {
    return Array.from({ length: count }, (_, i) => new Date(this.timeOf(this.written + i)).toISOString());
  }

  /** `count` events were written: time moves on to the last one's, and a passed deadline fires. */
  advance(count: number): void {
    this.written += count;
    const now = this.now().getTime();
    for (const timer of [...this.timers]) {
      if (now < timer.at) continue;
      this.timers.delete(timer);
      timer.fire();
    }
  }

  // before the first event it reads the task's start; past the recording's end (a diverging replay) its last time
  private timeOf(index: number): number {
    return this.times[Math.min(Math.max(0, index), this.times.length - 1)];
  }
}

/**
 * A replay's own log: in memory, never the live one, every event stamped by the replay's
 * RecordedClock, which moves on as events are written. What reached the recorded task from outside
 * its run (RecordedArrivals) is written into it where the recording has it.
 */
export class RecordedClockEventStore extends WrappingEventStore {
  constructor(
    private readonly clock: RecordedClock,
    private readonly arrivals: RecordedArrivals | null = null,
  ) {
    super(new InMemoryEventStore());
  }

  /** ids of events stamped when a writer folded them (it names its events): their append keeps the stamp */
  private readonly stamped = new Set<string>();

  async append(taskId: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult> {
    const arrived = this.arrivals?.before(taskId, events, options.expected) ?? [];
    if (arrived.length) await this.appendStamped(taskId, arrived, { expected: 'any' });
    const result = await this.appendStamped(taskId, events, options);
    const then = this.arrivals?.after(taskId, result.nextExpectedSequence) ?? [];
    if (then.length) await this.appendStamped(taskId, then, { expected: 'any' });
    return result;
  }

  private async appendStamped(
    taskId: string,
    events: readonly NewEvent[],
    options: AppendOptions,
  ): Promise<AppendResult> {
    const isStamped = (e: NewEvent) => e.event_id !== undefined && this.stamped.has(e.event_id);
    const fresh = events.filter((e) => !isStamped(e)).length;
    const stamps = this.clock.stamps(fresh);
    let next = 0;
    const result = await this.inner.append(
      taskId,
      events.map((e) => (isStamped(e) ? e : { ...e, created_at: stamps[next++] })),
      options,
    );
    for (const e of events) if (e.event_id !== undefined) this.stamped.delete(e.event_id);
    this.clock.advance(fresh);
    return result;
  }

  /** Stamped now, in the order the writer hands them over: the order they will be written in. */
  override prepareAppend(taskId: string, events: readonly NewEvent[]): readonly NewEvent[] {
    const stamps = this.clock.stamps(events.length);
    this.clock.advance(events.length);
    return this.inner.prepareAppend(taskId, events).map((e, i) => {
      if (e.event_id !== undefined) this.stamped.add(e.event_id);
      return { ...e, created_at: stamps[i] } as NewEvent;
    });
  }
}
