import { LoopLoadSource } from '../loop/pacing';

/** When the runtime refuses new submissions and holds queued tasks back. */
export interface BackpressureLimits {
  /** tasks waiting for a run slot (submissions still being written included) before a submission is refused (QueueFullError) */
  maxQueued: number;
  /** submissions whose TASK_RECEIVED is not durable yet before a submission is refused (OverloadedError) */
  maxPendingSubmissions: number;
  /**
   * sustained event-loop delay, ms, above which a submission is refused (OverloadedError) while the
   * queue is not absorbed (its oldest task has waited maxStartWaitMs, 5 s without that bound); a
   * loop busy with the tasks' own work refuses nothing; 0: the loop is not watched
   */
  maxLoopDelayMs: number;
  /**
   * sustained share of time the event loop is busy (0..1) above which the same happens, on the
   * same condition: a loop blocked in many short waits (an fsync per commit) is late by little each
   * time yet has no time left, and requests then queue unseen in the kernel; 1: not watched
   */
  maxLoopUtilization: number;
  /**
   * share of time the event loop is busy (0..1), with the store's commit thread's share added when it
   * has one, above which, while submissions wait (SubmissionPacing), a queued task waits to start (beyond the one that
   * always runs) and running tasks take turns (SubmissionPacing): the submissions' answers keep that
   * headroom, and the queue drains once they stop; 1: tasks start and run up to the overload limits
   */
  maxLoopUtilizationForStarts: number;
  /**
   * longest the oldest queued task waits for the submissions' sake, ms: as it nears this wait,
   * running tasks' paced steps come closer, and past it tasks start and run at full speed while
   * submissions arrive (up to the overload limits), so a sustained load does not grow the queue for
   * as long as it lasts; 0: no bound
   */
  maxStartWaitMs: number;
}

export const DEFAULT_BACKPRESSURE: BackpressureLimits = {
  maxQueued: 10_000,
  maxPendingSubmissions: 1_000,
  maxLoopDelayMs: 250,
  maxLoopUtilization: 0.9,
  maxLoopUtilizationForStarts: 0.5,
  maxStartWaitMs: 5_000,
};

/** how long the oldest queued task may wait before a saturated loop refuses submissions, when maxStartWaitMs sets no bound */
export const UNABSORBED_WAIT_MS = 5_000;

/** Retry-After of a refused submission: overload is shed in well under a second once the burst stops. */
export const BACKPRESSURE_RETRY_AFTER_SECONDS = 1;

/** What says the event loop is loaded beyond the limits, or null when it is not (or not watched). */
export function loopOverloaded(
  limits: BackpressureLimits | null,
  loop: LoopLoadSource | null,
): { reason: string; details: Record<string, number> } | null {
  if (!limits || !loop) return null;
  if (limits.maxLoopDelayMs > 0) {
    const delay = Math.round(loop.delayMs());
    if (delay > limits.maxLoopDelayMs)
      return {
        reason: `delay ${delay} ms, at most ${limits.maxLoopDelayMs}`,
        details: { loop_delay_ms: delay, max_loop_delay_ms: limits.maxLoopDelayMs },
      };
  }
  if (limits.maxLoopUtilization < 1) {
    const utilization = Math.round(loop.utilization() * 100) / 100;
    if (utilization > limits.maxLoopUtilization)
      return {
        reason: `busy ${Math.round(utilization * 100)}% of the time, at most ${Math.round(limits.maxLoopUtilization * 100)}%`,
        details: { loop_utilization: utilization, max_loop_utilization: limits.maxLoopUtilization },
      };
  }
  return null;
}
