import { RuntimeEvent, WaitArgs } from '@runledger/contracts';

/** When a wait set at `now` is due: its point in time, or `now` plus its duration. */
export function dueAtOf(wait: WaitArgs, now: Date): string {
  return 'until' in wait
    ? new Date(Date.parse(wait.until)).toISOString()
    : new Date(now.getTime() + wait.duration_ms).toISOString();
}

/** A recording's timers: a replay sets each one due when the recording did, whatever its clock says. */
export class RecordedTimers {
  private constructor(private readonly due: ReadonlyMap<string, string>) {}

  static fromEvents(events: readonly RuntimeEvent[]): RecordedTimers {
    const due = new Map<string, string>();
    for (const e of events) if (e.type === 'TIMER_SET') due.set(e.payload.timer_id, e.payload.due_at);
    return new RecordedTimers(due);
  }

  dueAt(timerId: string): string | undefined {
    return this.due.get(timerId);
  }
}
