import { ConcurrencyError, LeaseLostError, NewEvent, RuntimeEvent } from '@runledger/contracts';
import { EventStore, LeaseToken } from '@runledger/event-store';
import { TaskState, evolve, foldTaskState } from '@runledger/state-store';
import { TaskCheckpoints } from './checkpoints';
import { TaskProgress } from './progress';
import { TaskFold } from './task-fold';

/** Someone else ended the task (cancel from another path) while the loop was writing. */
export class TaskEndedElsewhereError extends Error {}

/** The lease a writer appends under (fencing): every append carries `token`; `onLost` hears once when the store refuses it. */
export interface WriterLease {
  token: LeaseToken;
  onLost(err: LeaseLostError): void;
}

/**
 * The single writer of one task's stream while the loop runs it: appends in
 * order (concurrent plan steps queue up), with the expected sequence, and keeps
 * the task's fold current: the log is folded once when the writer opens, then
 * every event it appends (or finds appended by someone else) is applied. With
 * checkpoints, an append that calls for one carries its CHECKPOINT_SAVED, and
 * the snapshot is stored after the commit. Under a lease, the first append the
 * store refuses for a lost lease ends the writer: it reports the loss and
 * refuses every later append itself, so nothing more reaches the log.
 */
export class TaskWriter {
  private chain: Promise<unknown> = Promise.resolve();
  private readonly deferred: NewEvent[] = [];
  /** what the loop, its guards and the engine's gates read instead of folding the log */
  readonly fold: TaskFold;
  private lost: LeaseLostError | null = null;
  /** the task-state projection's own fold of what this writer saw committed: a checkpoint's state, unread */
  private taskState: TaskState | null;

  private constructor(
    private readonly store: EventStore,
    readonly taskId: string,
    events: readonly RuntimeEvent[],
    private readonly checkpoints: TaskCheckpoints | null,
    private readonly lease: WriterLease | null,
  ) {
    this.fold = new TaskFold(taskId, events);
    this.taskState = foldTaskState(events);
  }

  static async open(
    store: EventStore,
    taskId: string,
    checkpoints?: ((log: readonly RuntimeEvent[]) => TaskCheckpoints) | null,
    lease?: WriterLease | null,
  ): Promise<TaskWriter> {
    const log = await store.readWholeStream(taskId);
    return new TaskWriter(store, taskId, log, checkpoints?.(log) ?? null, lease ?? null);
  }

  get progress(): TaskProgress {
    return this.fold.progress;
  }

  get log(): readonly RuntimeEvent[] {
    return this.fold.log;
  }

  /**
   * Appends `events` (after any deferred ones, in the same commit) and resolves
   * with the stored copies of `events`.
   */
  append(events: readonly NewEvent[]): Promise<RuntimeEvent[]> {
    const deferred = this.deferred.splice(0);
    const run = this.chain.then(async () => {
      const stored = await this.write([...deferred, ...events]);
      return stored.slice(deferred.length, deferred.length + events.length);
    });
    this.chain = run.catch(() => undefined);
    return run;
  }

  /**
   * Events that need not be durable on their own (a plan step's STEP_STARTED):
   * they ride at the head of this writer's next append, in its commit, and the
   * fold sees them only then. Defer only what a next append is sure to follow,
   * and whose loss in a crash changes nothing a resume relies on.
   */
  defer(events: readonly NewEvent[]): void {
    this.deferred.push(...events);
  }

  /** Appends the deferred events, if any, on their own. */
  async flush(): Promise<void> {
    if (this.deferred.length > 0) await this.append([]);
  }

  private applyCommitted(events: readonly RuntimeEvent[]): void {
    for (const e of events) {
      this.fold.apply(e);
      this.taskState = evolve(this.taskState, e);
    }
  }

  private async write(events: readonly NewEvent[]): Promise<RuntimeEvent[]> {
    if (this.lost) throw this.lost;
    if (events.length === 0) return [];
    const batch = this.checkpoints?.extend(this.progress, events) ?? events;
    const withSession = batch.map(
      (e) => ({ session_id: this.progress.session_id || undefined, ...e }) as NewEvent,
    );
    try {
      const res = await this.store.append(this.taskId, withSession, {
        expected: this.progress.last_seq === 0 ? 'no_stream' : this.progress.last_seq,
        ...(this.lease ? { lease: this.lease.token } : {}),
      });
      this.applyCommitted(res.events);
      // not waited for: the snapshot is taken now (its state and progress are this commit's)
      void this.checkpoints?.appended(res.events, this.progress, this.taskState);
      return res.events;
    } catch (err) {
      if (err instanceof LeaseLostError && this.lease) {
        this.lost = err;
        this.lease.onLost(err);
      }
      if (!(err instanceof ConcurrencyError)) throw err;
      const missed = await this.store.readStream(this.taskId, { after_seq: this.progress.last_seq });
      this.applyCommitted(missed);
      if (this.progress.final) throw new TaskEndedElsewhereError(`task ${this.taskId} already ended`);
      return this.write(events);
    }
  }
}
