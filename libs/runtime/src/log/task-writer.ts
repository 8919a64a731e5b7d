import {
  ConcurrencyError,
  LeaseLostError,
  NewEvent,
  RuntimeEvent,
  isFinalEventType,
} from '@runledger/contracts';
import {
  AppendResult,
  EventStore,
  LeaseToken,
  asChecked,
  buildEnvelopes,
  checkNewEvent,
  writerChecked,
} from '@runledger/event-store';
import type { TaskState } from '@runledger/state-store';
import { TaskCheckpoints } from './checkpoints';
import { TaskProgress } from './progress';
import { TaskFold } from './task-fold';

/** How long a streamed event waits to ride in another append before it is appended on its own. */
export const STREAM_FLUSH_MS = 10;

/** Someone else ended the task (cancel from another path) while the loop was writing. */
export class TaskEndedElsewhereError extends Error {}

/** The lease a writer appends under (fencing): every append carries `token`; `onLost` hears once when the store refuses it. */
export interface WriterLease {
  token: LeaseToken;
  onLost(err: LeaseLostError): void;
}

/** One event handed to the writer: as it will be appended, as the fold already has it, and when it is stored. */
interface Submitted {
  event: NewEvent;
  /** the envelope the store will give it, folded at once; its position is filled in at the commit */
  folded: RuntimeEvent;
  /** a CHECKPOINT_SAVED's snapshot context, taken when it was folded */
  context: unknown;
  stored: Promise<RuntimeEvent>;
  settle: { resolve: (e: RuntimeEvent) => void; reject: (err: unknown) => void };
  /** a memory write's listing in the store (EventStore.handOver), from its staging until its commit */
  unlist: (() => void) | null;
}

/**
 * Hears a task's final event, once at each stage: `handed` when it is handed to the store (the task
 * computes nothing more: its commit is left, sent again after a conflict, then its wind-down),
 * `committed` once it is durable and its commit listeners, memory among them, have heard it.
 */
export interface TaskEndListener {
  handed(): void;
  committed(): void;
}

/**
 * The single writer of one task's stream while the loop runs it. Every event
 * handed to it is folded at once, with the envelope the store will give it
 * (its sequence follows the events handed over before it; its id and time
 * are chosen here), so the loop, its guards and the engine's gates read the
 * current state without folding the log. `append` resolves once its events
 * are durable; `defer` hands over events that need no commit of their own:
 * they ride in the next append's commit. What needs durability before it
 * (a tool's intent, a model call, a wait for a person, the final event) is
 * appended; what follows from it by computation alone (a model's reply, the
 * router's decision, a tool's outcome and what is judged of it) is deferred.
 * A crash before the next commit loses only those, as if it had come a
 * moment earlier. Appends go in order (concurrent plan steps queue up) with
 * the expected sequence; if another writer got in between, the fold is
 * rebuilt from the log with its events first and the pending events after.
 * Any other failure ends the writer: its fold holds events the log does not,
 * so every later append is refused with that error (the task resumes from
 * the log). With checkpoints, a CHECKPOINT_SAVED joins the events that call
 * for one, and its snapshot is stored after the commit. Under a lease, the
 * first append the store refuses for a lost lease ends the writer too.
 * Its memory writes are listed in the store (EventStore.handOver), where
 * memory's deduplication sees them, from the moment they are staged until
 * their commit is published (or they are dropped or refused).
 */
export class TaskWriter {
  private chain: Promise<unknown> = Promise.resolve();
  /** handed over, not yet sent to the store, in order */
  private staged: Submitted[] = [];
  private current: TaskFold;
  /** the last sequence known committed */
  private committedSeq: number;
  private failed: unknown = null;
  /** appends streamed events that no other append carried in time (see stream) */
  private streamFlush: NodeJS.Timeout | null = null;
  private closed = false;
  private finalHanded = false;

  private constructor(
    private readonly store: EventStore,
    readonly taskId: string,
    events: readonly RuntimeEvent[],
    private readonly checkpoints: TaskCheckpoints | null,
    private readonly lease: WriterLease | null,
    private final: TaskEndListener | null,
  ) {
    this.current = new TaskFold(taskId, events);
    this.committedSeq = this.current.progress.last_seq;
  }

  /** `final` hears the task's final event written through this writer: handed to the store, then committed. */
  static async open(
    store: EventStore,
    taskId: string,
    checkpoints?: ((log: readonly RuntimeEvent[]) => TaskCheckpoints) | null,
    lease?: WriterLease | null,
    final?: TaskEndListener,
  ): Promise<TaskWriter> {
    const [log] = await Promise.all([store.readWholeStream(taskId), store.readyToPrepare()]);
    return new TaskWriter(store, taskId, log, checkpoints?.(log) ?? null, lease ?? null, final ?? null);
  }

  /** what the loop, its guards and the engine's gates read instead of folding the log */
  get fold(): TaskFold {
    return this.current;
  }

  get progress(): TaskProgress {
    return this.current.progress;
  }

  get log(): readonly RuntimeEvent[] {
    return this.current.log;
  }

  /** the last sequence known to be in the log; the fold may be ahead of it by what is not committed yet */
  get committedThrough(): number {
    return this.committedSeq;
  }

  /**
   * Folds in what other writers appended since the last commit (a person's answer, an interrupt):
   * true when there was something. The loop calls it between rounds, its safe point; the events
   * handed over meanwhile follow them, as after a conflict.
   */
  catchUp(): Promise<boolean> {
    const run = this.chain.then(async () => {
      if (this.failed || (await this.store.streamVersion(this.taskId)) <= this.committedSeq) return false;
      await this.rebase([]);
      return true;
    });
    this.chain = run.catch(() => undefined);
    return run;
  }

  /**
   * Appends `events` (after any deferred ones, in the same commit) and resolves
   * with their stored copies once they are durable.
   */
  append(events: readonly NewEvent[]): Promise<RuntimeEvent[]> {
    let mine: Submitted[];
    try {
      mine = this.submit(events);
    } catch (err) {
      return Promise.reject(err);
    }
    const run = this.chain.then(() => this.sendStaged());
    this.chain = run.catch(() => undefined);
    return run.then(() => Promise.all(mine.map((s) => s.stored)));
  }

  /**
   * Events that need no commit of their own: folded now, they ride in this
   * writer's next append. Defer only what a next append is sure to follow.
   */
  defer(events: readonly NewEvent[]): void {
    this.submit(events);
  }

  /**
   * Events watchers want soon but nothing waits on (a streamed answer's
   * pieces): deferred, so they ride in the next append's commit, and appended
   * on their own `withinMs` after the first of them when no append carried
   * them first. A stream of pieces then costs a commit per window at most,
   * not one per piece; a crash before it loses only what the call that
   * streamed them would stream again.
   */
  stream(events: readonly NewEvent[], withinMs = STREAM_FLUSH_MS): void {
    this.submit(events);
    if (this.streamFlush || this.closed) return;
    this.streamFlush = setTimeout(() => {
      this.streamFlush = null;
      // a failure ends the writer (fail), and the next append reports it to whoever waits
      this.flush().catch(() => undefined);
    }, withinMs);
    this.streamFlush.unref();
  }

  /**
   * The run that wrote through this writer is over: what it deferred and did not append is dropped
   * (a resume decides again from the log), and no stream window appends it later, after another
   * run of the task may have begun.
   */
  close(): void {
    this.closed = true;
    this.cancelStreamFlush();
    // what appends already called still send stays listed until its commit is published or refused; what is
    // staged once they are done is dropped
    void this.chain.then(() => {
      for (const s of this.staged) s.unlist?.();
    });
  }

  private cancelStreamFlush(): void {
    if (this.streamFlush) clearTimeout(this.streamFlush);
    this.streamFlush = null;
  }

  /** Appends the deferred events, if any, on their own. */
  async flush(): Promise<void> {
    if (this.staged.length > 0) await this.append([]);
  }

  /** Validates, completes and folds `events` (with a CHECKPOINT_SAVED when they call for one). */
  private submit(events: readonly NewEvent[]): Submitted[] {
    if (this.failed) {
      this.dropDecidedWrites(events);
      throw this.failed;
    }
    if (events.length === 0) return [];
    const batch = this.checkpoints?.extend(this.progress, events, this.committedSeq) ?? events;
    const now = new Date().toISOString();
    // the fold must see each event as it will be stored: payload defaults filled (the store takes the parsed
    // payload as it is), and whatever the stores in front of the log change on the way in (secrets redacted,
    // a replay's clock). Checked here as the store checks an event (what the caller gave: its payload, ids
    // and time); what the writer fills in comes from the log (the session) or itself (the id, the time), so
    // the store takes the events as checked (writerChecked) unless a store in front changes them.
    const prepared = this.store.prepareAppend(
      this.taskId,
      batch.map((e, i) => {
        const checked = checkNewEvent(e, i);
        return writerChecked({
          ...e,
          payload: checked.payload,
          event_id: checked.event_id,
          session_id: e.session_id ?? (this.progress.session_id || undefined),
          created_at: e.created_at ?? now,
        } as NewEvent);
      }),
    );
    // the envelopes the store will give them, as the next of the stream (their positions come at the commit)
    const envelopes = buildEnvelopes(
      this.taskId,
      prepared.map(asChecked),
      { version: this.progress.last_seq, session_id: this.progress.session_id || null },
      now,
    );
    const handed = prepared.map((event, i) => {
      const submitted = this.track(event, { ...envelopes[i], position: 0 } as RuntimeEvent);
      this.current.apply(submitted.folded);
      if (event.type === 'CHECKPOINT_SAVED')
        submitted.context = this.checkpoints?.context(submitted.folded, this.progress) ?? null;
      return submitted;
    });
    this.staged.push(...handed);
    // memory's deduplication sees a task's writes from the moment they are decided (MemoryService.decideWrite lists
    // each under its id) to their commit: listed again under the same id, in its place, each is this writer's
    if (this.closed) this.dropDecidedWrites(events);
    else
      for (const h of handed)
        if (h.folded.type === 'MEMORY_WRITTEN') h.unlist = this.store.handOver([h.folded]);
    return handed;
  }

  /** `event` handed over, folded as `folded`, with the promise its commit settles. */
  private track(event: NewEvent, folded: RuntimeEvent): Submitted {
    let settle!: Submitted['settle'];
    const stored = new Promise<RuntimeEvent>((resolve, reject) => (settle = { resolve, reject }));
    // its caller may be gone (a deferred event, an append whose turn failed first): never unhandled
    stored.catch(() => undefined);
    return { event, folded, context: null, stored, settle, unlist: null };
  }

  /** One turn of the chain: everything handed over so far, in one append. */
  private async sendStaged(): Promise<void> {
    if (this.failed) throw this.failed;
    const batch = this.staged.splice(0);
    if (batch.length === 0) return;
    this.cancelStreamFlush();
    let res: AppendResult;
    // the task's public state after each event, as the projection of the log will have it: the store's
    // tasks projection takes the last one instead of folding the batch again, and the fold the rest
    const states = this.current.stateAhead(batch.map((s) => s.folded));
    try {
      if (this.final && !this.finalHanded && batch.some((s) => isFinalEventType(s.event.type))) {
        this.finalHanded = true;
        this.final.handed();
      }
      res = await this.store.append(
        this.taskId,
        batch.map((s) => s.event),
        {
          expected: this.committedSeq === 0 ? 'no_stream' : this.committedSeq,
          ...(this.lease ? { lease: this.lease.token } : {}),
          folded: { base: this.committedSeq, state: states[states.length - 1] },
        },
      );
    } catch (err) {
      if (err instanceof ConcurrencyError && !this.failed) {
        // its memory writes stay listed for the retry: a task started meanwhile still sees them
        try {
          await this.rebase(batch);
        } catch (rebaseErr) {
          for (const s of batch) s.unlist?.();
          throw rebaseErr;
        }
        return this.sendStaged();
      }
      this.fail(err, batch);
      throw err;
    }
    this.committed(batch, res.events, states);
  }

  private committed(
    batch: readonly Submitted[],
    stored: readonly RuntimeEvent[],
    states: readonly (TaskState | null)[],
  ): void {
    // the store let the listings go when it published the commit: a release now changes nothing, unless an
    // id was stored already (an idempotent retry publishes nothing)
    for (const s of batch) s.unlist?.();
    batch.forEach((s, i) => {
      const e = stored[i];
      if (e?.event_id !== s.folded.event_id || e.sequence !== s.folded.sequence) {
        const err = new Error(
          `task ${this.taskId}: the store wrote ${e?.event_id}@${e?.sequence} where ${s.folded.event_id}@${s.folded.sequence} was folded`,
        );
        this.fail(err, batch);
        throw err;
      }
      // the state folded ahead holds for the event the store wrote when it is the one folded
      if (
        e.payload === s.folded.payload &&
        e.created_at === s.folded.created_at &&
        e.session_id === s.folded.session_id
      )
        this.current.committedAs(states[i]);
      else this.current.committed(e);
      // the folded copy is the one the log holds: it gets what only the store could assign
      Object.assign(s.folded, { position: e.position, session_id: e.session_id, created_at: e.created_at });
      this.committedSeq = e.sequence;
      // not waited for: the snapshot's context and state are this checkpoint's
      if (e.type === 'CHECKPOINT_SAVED') void this.checkpoints?.store(e, s.context, this.current.state);
      s.settle.resolve(e);
    });
    if (this.final && isFinalEventType(stored[stored.length - 1]?.type)) {
      const heard = this.final;
      this.final = null;
      heard.committed();
    }
  }

  /**
   * Another writer appended in between: the fold starts again from the log,
   * its events first, then ours (the batch that was refused, then whatever
   * was handed over since) with the sequences that now follow.
   */
  private async rebase(batch: readonly Submitted[]): Promise<void> {
    const missed = await this.store.readStream(this.taskId, { after_seq: this.committedSeq });
    const committed = this.current.log.filter((e) => e.sequence <= this.committedSeq);
    const pending = [...batch, ...this.staged];
    this.current = new TaskFold(this.taskId, [...committed, ...missed], this.current.state);
    for (const e of missed) this.current.committed(e);
    this.committedSeq = this.current.progress.last_seq;
    if (this.progress.final) {
      const err = new TaskEndedElsewhereError(`task ${this.taskId} already ended`);
      this.fail(err, pending);
      throw err;
    }
    for (const s of pending) {
      s.folded.sequence = this.progress.last_seq + 1;
      if (s.event.type === 'CHECKPOINT_SAVED') {
        // a new payload, not a change to the parsed one (a parsed payload is not validated again)
        const payload = { ...s.event.payload, at_sequence: s.folded.sequence - 1 };
        s.event = { ...s.event, payload };
        s.folded.payload = payload;
      }
      this.current.apply(s.folded);
    }
    this.staged = pending;
  }

  /**
   * Memory writes a run that is over hands in (a sibling step finishing after the close, or after a failure):
   * the listings their decisions made (MemoryService.decideWrite) go now, not when they time out.
   */
  private dropDecidedWrites(events: readonly NewEvent[]): void {
    this.store.withdraw(
      events.flatMap((e) =>
        e.type === 'MEMORY_WRITTEN' && e.event_id !== undefined ? [{ event_id: e.event_id }] : [],
      ),
    );
  }

  /** The fold holds events the log may never get: no later append is taken. */
  private fail(err: unknown, batch: readonly Submitted[]): void {
    this.failed ??= err;
    if (err instanceof LeaseLostError && this.lease) this.lease.onLost(err);
    for (const s of [...batch, ...this.staged.splice(0)]) {
      s.unlist?.();
      s.settle.reject(err);
    }
  }
}
