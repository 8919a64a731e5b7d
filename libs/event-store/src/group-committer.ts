/** One queued request's result from a group transaction: its own value, or its own error. */
export type GroupResult<T> = { ok: true; value: T } | { ok: false; error: unknown };

/**
 * Runs one group: every request in one transaction (one commit, one fsync),
 * each in its own savepoint so a failing request rolls back only itself.
 * Resolves with one result per request, in order, once the commit is durable;
 * rejects when the transaction as a whole failed (nothing of it committed).
 */
export type CommitGroup<Req, Res> = (requests: readonly Req[]) => Promise<GroupResult<Res>[]>;

export interface GroupCommitOptions {
  /**
   * How long the first request of a group waits for others while no group
   * commits: 0 (default) flushes on setImmediate, so everything submitted in
   * the same tick shares one transaction. What arrives while a group commits
   * has waited already: it goes as the next group once that one settles.
   */
  windowMs?: number;
  /** Most requests per transaction (default 512); 1 is one transaction per request. */
  maxBatch?: number;
  /**
   * How long a rider (`submit(r, { ride: true })`) waits for a group to join
   * before it is committed without one (default 10 ms).
   */
  rideMaxWaitMs?: number;
}

export interface SubmitOptions {
  /**
   * Starts no group: the request joins the next group other requests start,
   * or commits on its own after `rideMaxWaitMs`. For writes nobody waits on
   * promptly, which then cost no commit (nor, with a writer thread, no round
   * trip) of their own.
   */
  ride?: boolean;
}

interface Pending<Req, Res> {
  request: Req;
  ride: boolean;
  resolve: (value: Res) => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit, independent of the database: appends are queued and handed to
 * the adapter's `CommitGroup` in batches, one transaction at a time. While a
 * group commits, new requests gather for the next one, so under load the
 * number of fsyncs stays flat while throughput grows with the writers.
 */
export class GroupCommitter<Req, Res> {
  private queue: Pending<Req, Res>[] = [];
  private scheduled = false;
  private inFlight: Promise<void> | null = null;
  private readonly windowMs: number;
  private readonly maxBatch: number;
  private readonly rideMaxWaitMs: number;
  /** queued requests that are not riders: a group starts for them, or once riders waited long enough */
  private eager = 0;
  private rideTimer: NodeJS.Timeout | null = null;
  private ridersDue = false;

  constructor(
    private readonly commitGroup: CommitGroup<Req, Res>,
    options: GroupCommitOptions = {},
  ) {
    this.windowMs = options.windowMs ?? 0;
    this.maxBatch = options.maxBatch ?? 512;
    this.rideMaxWaitMs = options.rideMaxWaitMs ?? 10;
    if (!Number.isFinite(this.windowMs) || this.windowMs < 0)
      throw new RangeError(`group commit windowMs must be >= 0, got ${options.windowMs}`);
    if (!Number.isInteger(this.maxBatch) || this.maxBatch < 1)
      throw new RangeError(`group commit maxBatch must be a positive integer, got ${options.maxBatch}`);
    if (!Number.isFinite(this.rideMaxWaitMs) || this.rideMaxWaitMs < 0)
      throw new RangeError(`group commit rideMaxWaitMs must be >= 0, got ${options.rideMaxWaitMs}`);
  }

  /** Queue one request; settles with its own result once its group committed. */
  submit(request: Req, options: SubmitOptions = {}): Promise<Res> {
    const ride = options.ride === true;
    return new Promise<Res>((resolve, reject) => {
      this.queue.push({ request, ride, resolve, reject });
      if (ride) this.armRideTimer();
      else this.eager++;
      this.schedule();
    });
  }

  /** Resolves once everything submitted so far has settled; riders do not wait for company. */
  async drain(): Promise<void> {
    while (this.inFlight || this.queue.length > 0) {
      this.ridersDue = true;
      this.schedule();
      if (this.inFlight) await this.inFlight;
      else await new Promise<void>((r) => setImmediate(r));
    }
  }

  private armRideTimer(): void {
    if (this.rideTimer) return;
    this.rideTimer = setTimeout(() => {
      this.rideTimer = null;
      this.ridersDue = true;
      this.schedule();
    }, this.rideMaxWaitMs);
  }

  /** Whether a group may start now: none in flight, and someone waits for one (or riders waited enough). */
  private canStart(): boolean {
    return !this.inFlight && this.queue.length > 0 && (this.eager > 0 || this.ridersDue);
  }

  private schedule(): void {
    if (this.scheduled || !this.canStart()) return;
    this.scheduled = true;
    const start = () => {
      this.scheduled = false;
      if (this.canStart()) this.inFlight = this.flush();
    };
    if (this.windowMs > 0) setTimeout(start, this.windowMs);
    else setImmediate(start);
  }

  /**
   * The group in flight settled: the next one starts at once, before the
   * settled group's callers resume. What it holds gathered for a whole commit
   * already; started after them, it would wait until their continuations
   * (tasks taking their next steps) let go of the event loop, and with a
   * writer thread the thread would wait idle meanwhile.
   */
  private settled(): void {
    this.inFlight = null;
    if (this.canStart()) this.inFlight = this.flush();
  }

  private async flush(): Promise<void> {
    const group = this.queue.splice(0, this.maxBatch);
    for (const p of group) if (!p.ride) this.eager--;
    if (this.eager === this.queue.length) {
      this.ridersDue = false;
      if (this.rideTimer) clearTimeout(this.rideTimer);
      this.rideTimer = null;
    }
    let results: GroupResult<Res>[];
    try {
      results = await this.commitGroup(group.map((p) => p.request));
    } catch (err) {
      this.settled();
      for (const p of group) p.reject(err);
      return;
    }
    this.settled();
    group.forEach((p, i) => {
      const r = results[i] ?? {
        ok: false,
        error: new Error(`the group commit returned no result for request ${i}`),
      };
      if (r.ok) p.resolve(r.value);
      else p.reject(r.error);
    });
  }
}
