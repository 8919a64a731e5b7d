import { setTimeout as sleep } from 'node:timers/promises';
import { WALL_CLOCK } from '../ports';
import { runRunClockConformance } from '../testing/run-clock-conformance';
import { RecordedClock } from './replay-clock';

// a sleep ends by the event loop's millisecond clock, which may read up to 1 ms ahead of Date
runRunClockConformance('the wall clock', () => ({ clock: WALL_CLOCK, pass: (ms) => sleep(ms + 1) }));

const STEP_MS = 10;
/** A recording's clock with one event every STEP_MS; letting time pass writes the events it takes. */
const recorded = (deadlineFired: boolean) => () => {
  const start = Date.parse('2026-01-01T00:00:00.000Z');
  const clock = new RecordedClock(
    Array.from({ length: 1000 }, (_, i) => start + i * STEP_MS),
    deadlineFired,
  );
  // the task's TASK_RECEIVED is written: time starts there
  clock.advance(1);
  return { clock, pass: async (ms: number) => clock.advance(Math.ceil(ms / STEP_MS)) };
};

runRunClockConformance("a replay's clock, the recording stopped by its deadline", recorded(true));
runRunClockConformance("a replay's clock, the recording not stopped by its deadline", recorded(false), {
  fires: false,
});
