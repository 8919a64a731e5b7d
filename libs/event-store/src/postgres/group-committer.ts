/** One queued request's result from a group transaction: its own value, or its own error. */
export type GroupResult<T> = { ok: true; value: T } | { ok: false; error: unknown };

export interface GroupCommitOptions {
  /** most requests per transaction (default 512) */
  maxBatch?: number;
}

/**
 * Group commit for PgEventStore: requests submitted in the same tick, or while
 * a group commits, are handed to `commitGroup` together (at most `maxBatch`),
 * so one transaction and one commit serve all of them. `commitGroup` returns
 * one result per request, in order; when it throws, every request of its group
 * fails. One group commits at a time. The same shape (names, options, results)
 * as the adapter-neutral GroupCommitter of the SQLite append path on the
 * `append` branch, so the two become one by swapping the import.
 */
export class GroupCommitter<Req, Res> {
  private queue: { request: Req; resolve: (value: Res) => void; reject: (error: unknown) => void }[] = [];
  private running = false;
  private readonly maxBatch: number;

  constructor(
    private readonly commitGroup: (requests: readonly Req[]) => Promise<GroupResult<Res>[]>,
    options: GroupCommitOptions = {},
  ) {
    this.maxBatch = options.maxBatch ?? 512;
  }

  submit(request: Req): Promise<Res> {
    return new Promise<Res>((resolve, reject) => {
      this.queue.push({ request, resolve, reject });
      // setImmediate: appends made in the same turn of the event loop join one group
      if (!this.running && this.queue.length === 1) setImmediate(() => void this.drain());
    });
  }

  private async drain(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      while (this.queue.length > 0) {
        const group = this.queue.splice(0, this.maxBatch);
        let results: GroupResult<Res>[];
        try {
          results = await this.commitGroup(group.map((g) => g.request));
        } catch (error) {
          results = group.map(() => ({ ok: false, error }));
        }
        group.forEach((g, i) => {
          const r = results[i];
          if (r.ok) g.resolve(r.value);
          else g.reject(r.error);
        });
      }
    } finally {
      this.running = false;
    }
  }
}
