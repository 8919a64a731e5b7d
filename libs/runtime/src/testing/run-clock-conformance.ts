import { RunClock } from '../ports';

/** A fresh clock, and a way to let `ms` of its time pass (the wall clock sleeps; a recorded one writes events). */
export interface RunClockSubject {
  clock: RunClock;
  pass(ms: number): Promise<void>;
}

export interface RunClockConformanceOptions {
  /**
   * Whether its timers fire (default true). A replay's clock fires the deadline timer only when the
   * recording shows it fired: a recording stopped otherwise must not be cut short.
   */
  fires?: boolean;
}

const DUE_MS = 40;
/** the wall clock's timers run on the event loop's own millisecond clock, which may read up to 1 ms ahead of Date */
const TICK_MS = 1;

/**
 * The behaviour every RunClock adapter must show (the time a run's deadline is judged by), from a
 * short spec per adapter: `runRunClockConformance('X', () => ({ clock, pass }))`.
 */
export function runRunClockConformance(
  name: string,
  factory: () => RunClockSubject,
  options: RunClockConformanceOptions = {},
): void {
  const fires = options.fires ?? true;

  describe(`RunClock conformance: ${name}`, () => {
    let sut: RunClock;
    let pass: (ms: number) => Promise<void>;

    beforeEach(() => {
      ({ clock: sut, pass } = factory());
    });

    it('given time passes, now() moves on by at least that much and never back', async () => {
      const readings = [sut.now().getTime()];
      for (const ms of [10, 30, 0, 20]) {
        await pass(ms);
        readings.push(sut.now().getTime());
        expect(readings.at(-1)! - readings.at(-2)!).toBeGreaterThanOrEqual(ms);
      }
      expect(readings.every((t) => Number.isFinite(t))).toBe(true);
    });

    it(
      fires
        ? 'a timer fires once, and not before its time has passed on this clock'
        : 'a timer never fires, however much time passes',
      async () => {
        const set = sut.now().getTime();
        const fired: number[] = [];
        sut.after(DUE_MS, () => fired.push(sut.now().getTime()));
        expect(fired).toEqual([]);
        await pass(DUE_MS + 20);
        await pass(DUE_MS * 2);
        if (!fires) return expect(fired).toEqual([]);
        expect(fired).toHaveLength(1);
        expect(fired[0] - set).toBeGreaterThanOrEqual(DUE_MS - TICK_MS);
      },
    );

    it('given a timer is cancelled before it is due, then it never fires', async () => {
      const fired: number[] = [];
      const cancel = sut.after(DUE_MS, () => fired.push(sut.now().getTime()));
      cancel();
      await pass(DUE_MS * 3);
      expect(fired).toEqual([]);
    });

    it('given two timers, each fires on its own time and cancelling one leaves the other', async () => {
      const fired: string[] = [];
      const set = sut.now().getTime();
      const at: Record<string, number> = {};
      sut.after(DUE_MS, () => {
        fired.push('first');
        at.first = sut.now().getTime();
      });
      const cancelSecond = sut.after(DUE_MS * 2, () => fired.push('second'));
      sut.after(DUE_MS * 3, () => {
        fired.push('third');
        at.third = sut.now().getTime();
      });
      cancelSecond();
      await pass(DUE_MS * 5);
      if (!fires) return expect(fired).toEqual([]);
      expect(fired).toEqual(['first', 'third']);
      expect(at.third - set).toBeGreaterThanOrEqual(DUE_MS * 3 - TICK_MS);
    });
  });
}
