import { EventLoopUtilization, performance } from 'node:perf_hooks';
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';

/** The backpressure limits the pacing reads (see BackpressureLimits for what each means). */
export interface PacingLimits {
  /** the loop's busy share above which, while submissions wait, queued tasks wait and running ones take turns; 1: never */
  maxLoopUtilizationForStarts: number;
  /** longest the oldest queued task waits for the submissions' sake, ms; 0: no bound */
  maxStartWaitMs: number;
}

/** How loaded the event loop has lately been. */
export interface LoopLoadSource {
  /** how late ready callbacks ran, ms */
  delayMs(): number;
  /** the share of time the loop was busy, 0..1 */
  utilization(): number;
  /**
   * the same over the last few tens of ms, which follows a change at once
   * (and a lone stall too); `utilization` when the source has no such reading
   */
  recentUtilization?(): number;
  /**
   * the share of the same recent time the store's commit thread was busy (0 without one): a
   * submission waits for the loop and then for that thread, and tasks' commits load it as their
   * steps load the loop (with commits on the loop, `recentUtilization` holds them already)
   */
  recentCommitThreadUtilization?(): number;
  stop(): void;
}

const WINDOW_MS = 100;
const SAMPLE_MS = 20;

/** A thread's busy share over the last samples, the newest weighing half; 0 while it has no reading. */
class RecentShare {
  value = 0;
  private last: EventLoopUtilization | null = null;

  constructor(private readonly read: () => EventLoopUtilization | null) {}

  restart(): void {
    this.last = this.read();
  }

  sample(): void {
    const use = this.read();
    this.value =
      use && this.last ? (this.value + performance.eventLoopUtilization(use, this.last).utilization) / 2 : 0;
    this.last = use;
  }
}

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
  private readonly recentLoop = new RecentShare(() => performance.eventLoopUtilization());
  private readonly recentCommitThread: RecentShare;
  private stopped = false;

  /** `commitThreadUse`: the store's commit thread's cumulative reading (EventStore.commitThreadUse) */
  constructor(commitThreadUse: () => EventLoopUtilization | null = () => null) {
    this.recentCommitThread = new RecentShare(commitThreadUse);
  }

  delayMs(): number {
    this.watch();
    return Math.min(this.previousMaxMs, this.lastMaxMs);
  }

  utilization(): number {
    this.watch();
    return Math.min(this.previousUtilization, this.lastUtilization);
  }

  /** the utilization of the last 20 ms samples, the newest weighing half */
  recentUtilization(): number {
    this.watch();
    return this.recentLoop.value;
  }

  /** the commit thread's, alike */
  recentCommitThreadUtilization(): number {
    this.watch();
    return this.recentCommitThread.value;
  }

  private watch(): void {
    if (this.timer || this.stopped) return;
    this.windowStart = performance.now();
    this.windowUse = performance.eventLoopUtilization();
    this.recentLoop.restart();
    this.recentCommitThread.restart();
    this.schedule(this.windowStart);
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }

  private readonly sample = (): void => {
    const now = performance.now();
    this.windowMaxMs = Math.max(this.windowMaxMs, now - this.due);
    this.recentLoop.sample();
    this.recentCommitThread.sample();
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

/** while submissions need the loop, running tasks take one step between them per this many ms */
export const PACED_STEP_MS = 20;
/**
 * how long a submission may be on its way to the store before it counts as held back: a step of
 * the paced tasks; a submission answered within it waits for nobody, however busy the tasks keep
 * the loop (submissions answered together after one group commit are a steady load's, not a wait)
 */
export const SUBMISSION_HELD_MS = PACED_STEP_MS;

/** Whether a submission on its way to the store since `oldestAt` (null: none is) is held back at `now`. */
export function submissionsHeldBack(oldestAt: number | null, now: number): boolean {
  return oldestAt !== null && now - oldestAt >= SUBMISSION_HELD_MS;
}

/** how long after the last submission the queue's growth still counts as theirs */
export const SUBMISSIONS_RECENT_MS = 500;
/**
 * the window over which the queue's growth is read: arrivals outpacing the starts show within it,
 * while a burst the tasks absorb stops counting once it is a window old
 */
export const QUEUE_GROWTH_WINDOW_MS = 100;

/** What the runtime's queue holds, as SubmissionPacing reads it (handed over by watchQueue). */
export interface QueueReading {
  /** when the oldest queued task was queued (on the pacing's clock), null while none waits */
  oldestQueuedAt(): number | null;
  /** tasks waiting for a run slot */
  length(): number;
  /** when the oldest submission on its way to the store (its TASK_RECEIVED) was admitted, on the pacing's clock; null while none is */
  oldestSubmissionAt(): number | null;
  /** how far the queue may rise within QUEUE_GROWTH_WINDOW_MS before it counts as growing: the run slots */
  allowance: number;
}

const NO_QUEUE: QueueReading = {
  oldestQueuedAt: () => null,
  length: () => 0,
  oldestSubmissionAt: () => null,
  allowance: 1,
};

/**
 * Who gets the event loop while submissions wait. A submission's answer must
 * not wait behind running tasks. So while submissions wait (one has been on
 * its way to the store for SUBMISSION_HELD_MS, or the queue grows: it rose
 * more than its run slots over the last one to two QUEUE_GROWTH_WINDOW_MS
 * while submissions came) and the loop is busier than
 * `maxLoopUtilizationForStarts`, queued tasks wait to start (the controller
 * asks `submissionsNeedTheLoop`) and running tasks take turns: one step among
 * them every PACED_STEP_MS (`beforeStep`), which keeps their share of the
 * loop small yet never stops them. A lone client, or a steady load the tasks
 * absorb (the queue holds its level and submissions are answered in time), is
 * never paced, however busy the loop is with the tasks' work. The longer the oldest queued task has waited, the
 * closer the steps, until at `maxStartWaitMs` nothing is held back: the queue
 * then catches up rather than grows.
 */
export class SubmissionPacing {
  private lastSubmissionAt = -Infinity;
  private nextStepAt = -Infinity;
  private queue: QueueReading = NO_QUEUE;
  /** the queue's length at the start of the current and of the previous QUEUE_GROWTH_WINDOW_MS window */
  private level = { since: -Infinity, atStart: 0, atPreviousStart: 0 };

  constructor(
    private readonly limits: PacingLimits | null,
    readonly load: LoopLoadSource | null,
    /** the clock the pacing reads, and the queue's times are taken on */
    readonly now: () => number = () => performance.now(),
  ) {}

  /** A submission asked to be admitted. */
  submitted(): void {
    this.lastSubmissionAt = this.now();
    this.queueLength(this.lastSubmissionAt);
  }

  /** Where the queue's readings come from (the runtime's queue; times on `now`'s clock). */
  watchQueue(queue: QueueReading): void {
    this.queue = queue;
  }

  /** How long the oldest queued task has waited, ms (0 while none waits). */
  oldestWaitMs(): number {
    const queuedAt = this.queue.oldestQueuedAt();
    return queuedAt === null ? 0 : this.now() - queuedAt;
  }

  /** The queue's length now, noted at the start of each QUEUE_GROWTH_WINDOW_MS window. */
  private queueLength(now: number): number {
    const length = this.queue.length();
    const age = now - this.level.since;
    if (age >= QUEUE_GROWTH_WINDOW_MS) {
      // the window just past is the previous one; after a longer lull there is none but this reading
      const atPreviousStart = age < 2 * QUEUE_GROWTH_WINDOW_MS ? this.level.atStart : length;
      this.level = { since: now, atStart: length, atPreviousStart };
    }
    return length;
  }

  /**
   * Whether submissions wait: one has been on its way to the store for SUBMISSION_HELD_MS, or the
   * queue rose more than its allowance since the start of the previous QUEUE_GROWTH_WINDOW_MS window
   * while submissions came. A queue that holds its level, however long, does not grow.
   */
  submissionsWaiting(): boolean {
    const now = this.now();
    if (submissionsHeldBack(this.queue.oldestSubmissionAt(), now)) return true;
    if (now - this.lastSubmissionAt >= SUBMISSIONS_RECENT_MS) return false;
    return this.queueLength(now) - this.level.atPreviousStart > this.queue.allowance;
  }

  /**
   * Whether submissions wait while the loop is busier than the limit for task starts, and the
   * oldest queued task has not waited longer than maxStartWaitMs.
   */
  submissionsNeedTheLoop(): boolean {
    if (!this.limits || !this.load || this.limits.maxLoopUtilizationForStarts >= 1) return false;
    if (!this.submissionsWaiting()) return false;
    if (this.queueSlack(this.now()) === 0) return false;
    const loop = this.load.recentUtilization?.() ?? this.load.utilization();
    return (
      loop + (this.load.recentCommitThreadUtilization?.() ?? 0) > this.limits.maxLoopUtilizationForStarts
    );
  }

  /** 1 while no task waited, falling to 0 as the oldest queued one nears maxStartWaitMs (1 without a bound) */
  private queueSlack(now: number): number {
    const queuedAt = this.queue.oldestQueuedAt();
    const bound = this.limits?.maxStartWaitMs ?? 0;
    if (bound <= 0 || queuedAt === null) return 1;
    return Math.max(0, 1 - (now - queuedAt) / bound);
  }

  /**
   * Resolves when a running task may take its next step: at once unless
   * submissions need the loop; then when its turn comes (one step among all
   * running tasks per PACED_STEP_MS), or when `signal` aborts.
   */
  async beforeStep(signal: AbortSignal): Promise<void> {
    while (!signal.aborted && this.submissionsNeedTheLoop()) {
      const now = this.now();
      if (now >= this.nextStepAt) {
        this.nextStepAt = now + PACED_STEP_MS * this.queueSlack(now);
        return;
      }
      // an abort ends the wait; the loop then sees the signal
      await sleep(this.nextStepAt - now, undefined, { signal }).catch(() => undefined);
    }
  }
}

/** longest the running tasks hold the event loop in one go before they let it turn */
export const TASK_SLICE_MS = 5;
/** longest the running tasks wait, at a turn, for submissions being answered */
export const ANSWERING_WAIT_MAX_MS = PACED_STEP_MS;
/**
 * longest a submission counts as being answered: one whose commit hangs (a
 * store gone unresponsive) must not slow every task for as long as it hangs
 */
export const ANSWERING_HOLD_MAX_MS = 200;
let sliceStartedAt = performance.now();
/** the turn the tasks that yielded in this slice wait for */
let turn: Promise<void> | null = null;
/** submissions between their admission and their answer, each with when it was admitted */
const answering = new Set<{ at: number }>();
/** how many of `answering` came while submissions waited */
let answeringWaiting = 0;
/** settles when `answering` empties */
let answered: { promise: Promise<void>; resolve: () => void } | null = null;

/**
 * Marks a submission being answered until the returned function is called
 * (once; later calls do nothing), or for ANSWERING_HOLD_MAX_MS at most.
 * While it is held back (`waiting`: it came while submissions wait, or it has
 * been on its way SUBMISSION_HELD_MS) running tasks let the loop turn at their
 * next chance and wait there until no submission is being answered (at most
 * ANSWERING_WAIT_MAX_MS), so it is answered when its commit (on the writer
 * thread, say) is, not after a task slice. One answered in time holds nobody.
 */
export function holdTasksWhileAnswering(waiting: boolean): () => void {
  const submission = { at: performance.now() };
  answering.add(submission);
  if (waiting) answeringWaiting++;
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    clearTimeout(expiry);
    answering.delete(submission);
    if (waiting) answeringWaiting--;
    if (answering.size > 0 || !answered) return;
    answered.resolve();
    answered = null;
  };
  const expiry = setTimeout(release, ANSWERING_HOLD_MAX_MS);
  expiry.unref();
  return release;
}

/** Whether a submission being answered is held back: it came while submissions waited, or it is late (submissionsHeldBack). */
function answersHeldBack(now: number): boolean {
  return answeringWaiting > 0 || submissionsHeldBack(oldestAdmitted(answering), now);
}

/** When the oldest of `submissions` (a Set, in the order they were admitted) was admitted; null when there are none. */
export function oldestAdmitted(submissions: Set<{ at: number }>): number | null {
  for (const { at } of submissions) return at;
  return null;
}

/** Resolves once no submission is being answered, or after `maxMs`. */
function answersDone(maxMs: number): Promise<void> {
  if (answering.size === 0) return Promise.resolve();
  if (!answered) {
    let resolve!: () => void;
    const promise = new Promise<void>((r) => (resolve = r));
    answered = { promise, resolve };
  }
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((r) => (timer = setTimeout(r, maxMs)));
  return Promise.race([answered.promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Lets the event loop turn once the running tasks have held it for
 * TASK_SLICE_MS, or at once while a submission is being answered
 * (holdTasksWhileAnswering); never in a delegation's child, which runs in
 * step with its parent's other steps (a replay depends on that order). A task
 * that awaits nothing outside the process (a model answering in process,
 * in-process tools, events riding in a later commit) runs in promise
 * callbacks alone, which hold I/O, timers and the group commit's flush until
 * every such task is done: a burst of them would keep
 * requests unanswered and their events uncommitted for as long as they run.
 * Module state: the event loop is the process's, shared by every runtime in it.
 */
export async function letTheLoopTurn(task: { parent_task_id: string | null }): Promise<void> {
  if (task.parent_task_id !== null) return;
  const now = performance.now();
  const heldBack = answersHeldBack(now);
  if (!heldBack && now - sliceStartedAt < TASK_SLICE_MS) return;
  // One turn for every task that yields in this slice: resumed together, they share the next slice.
  // A turn each would hand each task a slice of its own, all in the same check phase of the loop.
  // After held-back submissions are answered, one more turn: their answers are written before the tasks resume.
  turn ??= (heldBack ? answersDone(ANSWERING_WAIT_MAX_MS) : Promise.resolve())
    .then(() => nextTurn())
    .then(() => {
      turn = null;
      sliceStartedAt = performance.now();
    });
  await turn;
}
