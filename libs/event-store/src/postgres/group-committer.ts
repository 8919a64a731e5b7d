/** What became of one job of a flushed group. */
export type JobOutcome<R> = { ok: true; value: R } | { ok: false; error: unknown };

/**
 * Group commit: jobs submitted while nothing is being flushed, or while a flush
 * runs, are handed to `flush` together (at most `maxGroup` at a time), so one
 * transaction and one commit serve all of them. `flush` returns one outcome per
 * job, in order; a flush that throws fails every job of its group. One flush
 * runs at a time.
 */
export class GroupCommitter<J, R> {
  private queue: { job: J; resolve: (value: R) => void; reject: (error: unknown) => void }[] = [];
  private running = false;

  constructor(
    private readonly flush: (jobs: readonly J[]) => Promise<JobOutcome<R>[]>,
    private readonly maxGroup = 256,
  ) {}

  submit(job: J): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ job, resolve, reject });
      // setImmediate: appends made in the same turn of the event loop join one group
      if (!this.running && this.queue.length === 1) setImmediate(() => void this.drain());
    });
  }

  /** jobs waiting for a flush */
  get pending(): number {
    return this.queue.length;
  }

  private async drain(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      while (this.queue.length > 0) {
        const group = this.queue.splice(0, this.maxGroup);
        let outcomes: JobOutcome<R>[];
        try {
          outcomes = await this.flush(group.map((g) => g.job));
        } catch (error) {
          outcomes = group.map(() => ({ ok: false, error }));
        }
        group.forEach((g, i) => {
          const o = outcomes[i];
          if (o.ok) g.resolve(o.value);
          else g.reject(o.error);
        });
      }
    } finally {
      this.running = false;
    }
  }
}
