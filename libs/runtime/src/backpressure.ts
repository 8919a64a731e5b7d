import { performance } from 'node:perf_hooks';

/** When the runtime refuses new submissions and holds queued tasks back. */
export interface BackpressureLimits {
  /** tasks waiting for a run slot (submissions still being written included) before a submission is refused (QueueFullError) */
  maxQueued: number;
  /** submissions whose TASK_RECEIVED is not durable yet before a submission is refused (OverloadedError) */
  maxPendingSubmissions: number;
  /**
   * sustained event-loop delay, ms, above which a submission is refused (OverloadedError) and no
   * further task starts while one runs; 0: the loop is not watched
   */
  maxLoopDelayMs: number;
  /**
   * sustained share of time the event loop is busy (0..1) above which the same happens: a loop
   * blocked in many short waits (an fsync per commit) is late by little each time yet has no time
   * left, and requests then queue unseen in the kernel; 1: not watched
   */
  maxLoopUtilization: number;
  /**
   * share of time the event loop is busy (0..1) above which, while submissions arrive, a queued task
   * waits to start (beyond the one that always runs): the submissions' answers keep that headroom,
   * and the queue drains once they stop; 1: tasks start up to the overload limits
   */
  maxLoopUtilizationForStarts: number;
}

export const DEFAULT_BACKPRESSURE: BackpressureLimits = {
  maxQueued: 10_000,
  maxPendingSubmissions: 1_000,
  maxLoopDelayMs: 250,
  maxLoopUtilization: 0.9,
  maxLoopUtilizationForStarts: 0.5,
};

/** Retry-After of a refused submission: overload is shed in well under a second once the burst stops. */
export const BACKPRESSURE_RETRY_AFTER_SECONDS = 1;

/** How loaded the event loop has lately been. */
export interface LoopLoadSource {
  /** how late ready callbacks ran, ms */
  delayMs(): number;
  /** the share of time the loop was busy, 0..1 */
  utilization(): number;
  stop(): void;
}

const WINDOW_MS = 100;
const SAMPLE_MS = 20;

/**
 * How late a 20 ms timer fires, as the largest lateness of each 100 ms window, and the loop's
 * utilization over each window; a reading is the smaller of the last two windows', so a lone stall (a GC pause, one large synchronous read) fills
 * one window and does not count, while a loop given more work than it can take reads high in both.
 * Watching starts at the first reading, so the stalls of booting are not read as overload.
 * (perf_hooks' monitorEventLoopDelay records nothing while every turn of the loop is busy.)
 */
export class EventLoopMonitor implements LoopLoadSource {
  private timer: NodeJS.Timeout | null = null;
  private due = 0;
  private windowStart = 0;
  private windowMaxMs = 0;
  private previousMaxMs = 0;
  private lastMaxMs = 0;
  private windowUse = performance.eventLoopUtilization();
  private previousUtilization = 0;
  private lastUtilization = 0;
  private stopped = false;

  delayMs(): number {
    this.watch();
    return Math.min(this.previousMaxMs, this.lastMaxMs);
  }

  utilization(): number {
    this.watch();
    return Math.min(this.previousUtilization, this.lastUtilization);
  }

  private watch(): void {
    if (this.timer || this.stopped) return;
    this.windowStart = performance.now();
    this.windowUse = performance.eventLoopUtilization();
    this.schedule(this.windowStart);
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }

  private readonly sample = (): void => {
    const now = performance.now();
    this.windowMaxMs = Math.max(this.windowMaxMs, now - this.due);
    if (now - this.windowStart >= WINDOW_MS) {
      this.previousMaxMs = this.lastMaxMs;
      this.lastMaxMs = this.windowMaxMs;
      this.windowMaxMs = 0;
      this.windowStart = now;
      this.previousUtilization = this.lastUtilization;
      this.lastUtilization = performance.eventLoopUtilization(this.windowUse).utilization;
      this.windowUse = performance.eventLoopUtilization();
    }
    if (!this.stopped) this.schedule(now);
  };

  private schedule(now: number): void {
    this.due = now + SAMPLE_MS;
    this.timer = setTimeout(this.sample, SAMPLE_MS);
    this.timer.unref();
  }
}
