import { OverloadedError, QueueFullError } from '@runledger/contracts';
import {
  BACKPRESSURE_RETRY_AFTER_SECONDS,
  BackpressureLimits,
  UNABSORBED_WAIT_MS,
  loopOverloaded,
} from './backpressure';
import { SubmissionPacing, holdTasksWhileAnswering, oldestAdmitted } from '../loop/pacing';
import { RunQueue } from './run-queue';

/**
 * Whether a new task is taken: its TASK_RECEIVED write is admitted, or refused before anything is
 * written, by the backpressure limits over the run queue, the submissions waiting for the store and
 * the event loop's load.
 */
export class Admission {
  /** submissions whose TASK_RECEIVED append has not returned yet, each with when it was admitted */
  private readonly inFlight = new Set<{ at: number }>();

  constructor(
    private readonly runs: RunQueue,
    private readonly pacing: SubmissionPacing,
    /** when submissions are refused; never when null */
    private readonly limits: BackpressureLimits | null,
    /** tasks run at once in this process */
    concurrency: number,
  ) {
    pacing.watchQueue({
      oldestQueuedAt: () => runs.oldestQueuedAt(),
      length: () => runs.size,
      oldestSubmissionAt: () => oldestAdmitted(this.inFlight),
      allowance: concurrency,
    });
  }

  /**
   * Admits a new task's TASK_RECEIVED write, or refuses it before anything is
   * written (refuseWhenSaturated). Admitted, it counts as a pending submission
   * until the returned release, called once the write settled; meanwhile, if
   * it came while submissions wait or is late, running tasks give it the loop
   * (holdTasksWhileAnswering).
   */
  admit(): () => void {
    this.pacing.submitted();
    this.refuseWhenSaturated();
    const submission = { at: this.pacing.now() };
    const waiting = this.pacing.submissionsWaiting();
    this.inFlight.add(submission);
    const answered = holdTasksWhileAnswering(waiting);
    return () => {
      this.inFlight.delete(submission);
      answered();
    };
  }

  /** Stops watching the event loop's load. */
  close(): void {
    this.pacing.load?.stop();
  }

  /** Refuses a new task, before anything is written, when the queue is full, too many submissions wait for the store, or the loop is saturated while the queue is not absorbed. */
  private refuseWhenSaturated(): void {
    const limits = this.limits;
    if (!limits) return;
    const pending = this.inFlight.size;
    const waiting = this.runs.size + pending;
    if (waiting >= limits.maxQueued)
      throw new QueueFullError(
        `${waiting} tasks already wait to run (at most ${limits.maxQueued}); retry later`,
        BACKPRESSURE_RETRY_AFTER_SECONDS,
        { queued: waiting, max_queued: limits.maxQueued },
      );
    if (pending >= limits.maxPendingSubmissions)
      throw new OverloadedError(
        `${pending} submissions already wait for the store (at most ${limits.maxPendingSubmissions}); retry later`,
        BACKPRESSURE_RETRY_AFTER_SECONDS,
        {
          pending_submissions: pending,
          max_pending_submissions: limits.maxPendingSubmissions,
        },
      );
    const load = loopOverloaded(limits, this.pacing.load);
    if (load && this.queueUnabsorbed())
      throw new OverloadedError(
        `the server is saturated (event loop ${load.reason}); retry later`,
        BACKPRESSURE_RETRY_AFTER_SECONDS,
        load.details,
      );
  }

  /**
   * Whether the queue is not being absorbed: its oldest task has waited maxStartWaitMs (UNABSORBED_WAIT_MS
   * without that bound). Only then does a saturated loop refuse a submission: a loop busy running
   * the tasks it took is doing the work it exists for, and a burst it will absorb is accepted.
   */
  private queueUnabsorbed(): boolean {
    const bound = this.limits?.maxStartWaitMs || UNABSORBED_WAIT_MS;
    return this.pacing.oldestWaitMs() >= bound;
  }
}
