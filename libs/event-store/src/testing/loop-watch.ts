import { performance } from 'node:perf_hooks';

/** How the event loop kept turning while it was watched: a 10 ms interval's ticks and its longest gap. */
export function watchLoop(): { stop(): { ticks: number; worstGapMs: number } } {
  let ticks = 0;
  let worstGapMs = 0;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    worstGapMs = Math.max(worstGapMs, now - last);
    last = now;
    ticks++;
  }, 10);
  return {
    stop: () => {
      clearInterval(timer);
      return { ticks, worstGapMs };
    },
  };
}
