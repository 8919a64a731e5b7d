import { EventEmitter } from 'node:events';
import { BackpressureLimits, loopOverloaded } from './backpressure';
import { SubmissionPacing } from '../loop/pacing';
import { TaskOwnership } from './task-ownership';
import { LeaseLostSignal, ShutdownSignal } from '../ports';
import { TaskProgress } from '../log/progress';
import { RuntimeLogger } from '../runtime-logger';
import { RuntimeLoop } from '../loop/runtime-loop';
import { WriterLease } from '../log/task-writer';

export interface RunQueueDeps {
  loop: RuntimeLoop;
  logger: RuntimeLogger;
  /** tasks run at once in this process */
  concurrency: number;
  /** shared with admission and the RuntimeLoop: when queued tasks are held back before they start */
  pacing: SubmissionPacing;
  /** when queued tasks are held back for a saturated loop; never when null */
  backpressure: BackpressureLimits | null;
  /** the leases of the tasks run here; absent: every task runs here, unfenced */
  ownership: TaskOwnership | null;
}

/** Resolves once this turn of the event loop is done: its I/O callbacks and the promise jobs they started. */
const afterThisTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
/** how long queued tasks are held back before the event loop is looked at again */
const HOLD_BACK_MS = 50;

/**
 * The tasks this process runs: queued in arrival order, each started when a run slot is free (a
 * delegation's child at once), claimed under its lease as it starts, and stopped on a lost lease or
 * on shutdown.
 */
export class RunQueue {
  /**
   * tasks waiting for a run slot, in arrival order, each with when it was queued (the pacing's clock);
   * a Map: a long queue is looked up and taken from often
   */
  private readonly queue = new Map<string, number>();
  /**
   * `end`: `handed` once its final event is handed to the store, `committed` once that is durable; only
   * the commit and its wind-down are left then (see slotsTaken)
   */
  private readonly active = new Map<
    string,
    { ctrl: AbortController; done: Promise<void>; end: 'running' | 'handed' | 'committed' }
  >();
  private readonly again = new Set<string>();
  /** running or about to run as a delegation's child */
  private readonly childTasks = new Set<string>();
  private readonly idle = new EventEmitter();
  private holdBackTimer: NodeJS.Timeout | null = null;
  private stopped = false;
  /** what follows a task's final event before its slot is free: its unfinished children are cancelled */
  private finalHandler: (p: TaskProgress) => Promise<void> = () => Promise.resolve();

  constructor(private readonly deps: RunQueueDeps) {
    this.idle.setMaxListeners(0);
    deps.ownership?.onLost((taskId) => this.abandon(taskId));
  }

  /** Whether the process stopped taking work (close). */
  get closed(): boolean {
    return this.stopped;
  }

  /** Tasks waiting for a run slot. */
  get size(): number {
    return this.queue.size;
  }

  /** When the oldest queued task was queued (the pacing's clock), null when none waits. */
  oldestQueuedAt(): number | null {
    const oldest = this.queue.values().next();
    return oldest.done ? null : oldest.value;
  }

  /** Run after a task's final event, before it leaves its slot (however it ended). */
  onFinal(handler: (p: TaskProgress) => Promise<void>): void {
    this.finalHandler = handler;
  }

  isQueued(taskId: string): boolean {
    return this.queue.has(taskId);
  }

  isRunning(taskId: string): boolean {
    return this.active.has(taskId);
  }

  /** Queued or running here. */
  holds(taskId: string): boolean {
    return this.active.has(taskId) || this.queue.has(taskId);
  }

  /** A child runs outside the task concurrency (see startChild); any other task waits for a slot. */
  enqueue(taskId: string, options: { child?: boolean } = {}): void {
    if (this.stopped) return;
    if (options.child) this.childTasks.add(taskId);
    if (this.active.has(taskId)) {
      this.again.add(taskId);
      return;
    }
    if (this.childTasks.has(taskId)) return this.start(taskId);
    if (!this.queue.has(taskId)) this.queue.set(taskId, this.deps.pacing.now());
    this.pump();
  }

  /** Takes the task off the queue and aborts its run here; resolves once that run stopped. */
  async stop(taskId: string): Promise<void> {
    const running = this.active.get(taskId);
    this.queue.delete(taskId);
    this.again.delete(taskId);
    if (running) {
      running.ctrl.abort();
      await running.done;
    }
  }

  /** Aborts the task's run here, if any, for `signal`'s reason. */
  abortRun(taskId: string, signal: unknown): void {
    this.active.get(taskId)?.ctrl.abort(signal);
  }

  /** Resolves once the task is neither queued nor running here, with its fold when it ended here. */
  async settled(taskId: string): Promise<TaskProgress | null> {
    let ended: TaskProgress | null = null;
    while (this.active.has(taskId) || this.queue.has(taskId)) {
      ended = await new Promise<TaskProgress | null>((resolve) =>
        this.idle.once(taskId, (p?: TaskProgress | null) => resolve(p ?? null)),
      );
    }
    return ended;
  }

  /** No task is queued or started any more. */
  stopTaking(): void {
    this.stopped = true;
    this.queue.clear();
  }

  /** In-flight tasks are aborted (left for resumeUnfinished); resolves once they stopped. */
  async stopRunning(): Promise<void> {
    if (this.holdBackTimer) clearTimeout(this.holdBackTimer);
    const running = [...this.active.values()];
    for (const r of running) r.ctrl.abort(new ShutdownSignal());
    await Promise.allSettled(running.map((r) => r.done));
  }

  /** The lease was lost: no more work on the task here, quietly (its new owner carries on). */
  private abandon(taskId: string): void {
    this.again.delete(taskId);
    this.queue.delete(taskId);
    const running = this.active.get(taskId);
    running?.ctrl.abort(new LeaseLostSignal(`lease on task ${taskId} lost`));
    if (!running) this.idle.emit(taskId);
    this.deps.logger.warn(
      { task_id: taskId, owner: this.deps.ownership?.owner },
      'lease lost: another process runs the task now; stopped working on it here',
    );
  }

  /**
   * A task is claimed when it starts, not when it is queued: submission writes only its
   * TASK_RECEIVED, and a task waiting here unclaimed may be taken by another instance, whose live
   * lease then makes this claim fail (null: not run here). Undefined without leases.
   */
  private async claimToRun(taskId: string): Promise<WriterLease | undefined | null> {
    const ownership = this.deps.ownership;
    if (ownership && !ownership.holds(taskId) && !(await ownership.claim(taskId))) return null;
    return this.writerLease(taskId);
  }

  /** What the task's run appends under: undefined without leases, null when the lease is gone. */
  private writerLease(taskId: string): WriterLease | undefined | null {
    const ownership = this.deps.ownership;
    if (!ownership) return undefined;
    const token = ownership.tokenOf(taskId);
    return token ? { token, onLost: () => ownership.lost(taskId, token.epoch) } : null;
  }

  /**
   * Tasks holding a slot of the task concurrency. Children run outside it (their parent's step holds
   * one), and so does a task whose final event is committed: the next one starts while it cancels its
   * children and lets its lease go. A task whose final event is only handed to the store computes
   * nothing more either, and the next one may start while that event commits (memory's deduplication
   * sees the handed writes: EventStore.handOver), but for at most `concurrency - 1` such tasks at once:
   * - so one slot runs tasks strictly in turn, each reading what the last one wrote (its memory);
   * - so a store that stalls holds at most twice the concurrency less one in running or handed tasks
   *   (children and tasks winding down aside), not every queued one.
   */
  private slotsTaken(): number {
    let running = 0;
    let handed = 0;
    for (const [id, task] of this.active) {
      if (this.childTasks.has(id) || task.end === 'committed') continue;
      if (task.end === 'handed') handed++;
      else running++;
    }
    return running + Math.max(0, handed - (this.deps.concurrency - 1));
  }

  private ended(taskId: string, stage: 'handed' | 'committed'): void {
    const task = this.active.get(taskId);
    if (!task || task.end === 'committed') return;
    task.end = stage;
    this.pump();
  }

  private pump(): void {
    while (!this.stopped && this.slotsTaken() < this.deps.concurrency && this.queue.size > 0) {
      // one task always runs, so the queue drains
      if (this.active.size > 0 && this.startsHeldBack()) {
        this.holdBack();
        return;
      }
      const next = this.queue.keys().next().value!;
      this.queue.delete(next);
      this.start(next, { afterThisTurn: true });
    }
  }

  /**
   * Whether a queued task waits before it starts: waiting submissions and the running tasks get the
   * loop first. It waits while submissions wait and the loop is busier than the start limit (or
   * saturated), since a task started then takes the time their answers need; with no submission
   * waiting, tasks start up to the run slots however busy the loop is with their work.
   */
  private startsHeldBack(): boolean {
    const pacing = this.deps.pacing;
    return (
      pacing.submissionsNeedTheLoop() ||
      (loopOverloaded(this.deps.backpressure, pacing.load) !== null && pacing.submissionsWaiting())
    );
  }

  /**
   * The task takes its slot now. A queued task's work (the lease claim, its first reads, the
   * beginning of its run) waits `afterThisTurn` of the event loop, so the answer to the submission
   * that queued it is written first; stopped meanwhile (cancelled, shut down), it does not start. A
   * delegation's child starts at once, in step with its parent (a replay depends on that order).
   */
  private start(taskId: string, options: { afterThisTurn?: boolean } = {}): void {
    const ctrl = new AbortController();
    let ended: TaskProgress | null = null;
    const claimed = options.afterThisTurn
      ? afterThisTurn().then(() => (ctrl.signal.aborted ? null : this.claimToRun(taskId)))
      : this.claimToRun(taskId);
    const done = claimed
      .then(async (lease) => {
        // stopped before it started, or another process runs it (it claimed the task while it waited here)
        if (lease === null) return;
        const run = await this.deps.loop.runTask(taskId, ctrl.signal, lease, {
          handed: () => this.ended(taskId, 'handed'),
          committed: () => this.ended(taskId, 'committed'),
        });
        if (run.progress.final && run.inLog) ended = run.progress;
        // however it ended (a deadline, a guard, a cancel), a task leaves no child running
        if (run.progress.final) await this.finalHandler(run.progress);
      })
      .catch((err: unknown) =>
        this.deps.logger.error({ task_id: taskId, err }, 'task stopped on an unexpected error'),
      )
      .finally(() => {
        this.active.delete(taskId);
        if (this.again.delete(taskId) && !this.stopped) this.enqueue(taskId);
        else {
          this.childTasks.delete(taskId);
          // ended, waiting for a person, or stopped: the lease goes (a waiting task's answer claims it again)
          if (!this.stopped) void this.deps.ownership?.release(taskId);
        }
        this.idle.emit(taskId, ended);
        this.pump();
      });
    this.active.set(taskId, { ctrl, done, end: 'running' });
  }

  private holdBack(): void {
    if (this.holdBackTimer) return;
    this.holdBackTimer = setTimeout(() => {
      this.holdBackTimer = null;
      this.pump();
    }, HOLD_BACK_MS);
    this.holdBackTimer.unref();
  }
}
