import { performance } from 'node:perf_hooks';
import { ArchiveRun, BatchDone } from './archiver';
import { ArchiveRunner } from './archiver';
import { RetentionPolicy } from './retention-policy';

export interface RetentionSweeperOptions {
  policy: RetentionPolicy;
  /** time between the end of one sweep and the start of the next */
  intervalMs: number;
  /**
   * rest between two batches of a sweep, and between two reclaim steps: the writer (and, on SQLite,
   * the event loop the archiver shares with the server) is free meanwhile. A rest lasts at least
   * `restFactor` times the step before it, so the sweeper holds them a bounded share of the time.
   */
  restMs: number;
  /** default 4: the sweeper works at most a fifth of the time while it sweeps */
  restFactor?: number;
  /** SQLite: free pages handed back to the file per step after a sweep moved something */
  reclaimPages?: number;
  /** reclaim steps per sweep at most (the rest waits for the next sweep) */
  reclaimSteps?: number;
  now?: () => number;
  log: {
    info(fields: Record<string, unknown>, msg: string): void;
    error(fields: Record<string, unknown>, msg: string): void;
  };
}

/**
 * Applies the retention policy inside the server, on an interval: one sweep is an archiver run,
 * batch after batch with a rest between them, so appends (and so POST /tasks) never queue behind
 * more than one short batch transaction. What a batch moved is recorded by the archiver itself
 * (TASKS_ARCHIVED). On PostgreSQL the run holds the archive lease: of several instances sweeping
 * at once, one moves trees and the others find it busy. `stop()` ends a sweep between batches and
 * waits for the batch in flight, so a shutdown never cuts one short (a batch is one transaction
 * either way).
 */
export class RetentionSweeper {
  private timer: NodeJS.Timeout | null = null;
  private current: Promise<unknown> | null = null;
  private stopping = false;
  private wake: (() => void) | null = null;
  /** when the last rest ended: the step since then is what the next rest is measured against */
  private workingSince = 0;

  constructor(
    private readonly archiver: ArchiveRunner,
    private readonly options: RetentionSweeperOptions,
  ) {}

  start(): void {
    if (this.stopping || this.timer) return;
    this.schedule();
  }

  /** Ends the sweep in progress after its current batch, and starts no other. */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.wake?.();
    await this.current?.catch(() => undefined);
  }

  /** One sweep now (the interval's own work): what moved, or `busy` when another instance sweeps. */
  sweep(): Promise<ArchiveRun> {
    const run = this.sweepOnce();
    this.current = run;
    return run;
  }

  private schedule(): void {
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.sweep()
        .catch((err: unknown) => this.options.log.error({ err }, 'retention sweep failed'))
        .finally(() => {
          if (!this.stopping) this.schedule();
        });
    }, this.options.intervalMs);
    this.timer.unref();
  }

  private async sweepOnce(): Promise<ArchiveRun> {
    const started = Date.now();
    this.workingSince = performance.now();
    const run = await this.archiver.run(this.options.policy, (this.options.now ?? Date.now)(), {
      pause: (segment) => this.rest(this.heldBy(segment)),
      stopped: () => this.stopping,
    });
    if (run.segments.length > 0 || run.catalogued.tasks > 0) {
      // the last batch's rest, which no next batch took
      await this.rest(this.heldBy(run.segments.at(-1) ?? null));
      for (let step = 0; step < (this.options.reclaimSteps ?? 20) && !this.stopping; step++) {
        if ((await this.archiver.reclaim(this.options.reclaimPages ?? 1000)) === 0) break;
        // a reclaim step holds the writer from its start to its end, wherever it runs
        await this.rest({ held: performance.now() - this.workingSince, free: 0 });
      }
      this.options.log.info(
        {
          tasks: run.tasks.length,
          receipts: run.receipts,
          events: run.events,
          segments: run.segments.map((s) => s.segment_id),
          bytes: run.bytes,
          catalogued: run.catalogued.tasks,
          ms: Date.now() - started,
        },
        'retention sweep archived finished task trees',
      );
    }
    return run;
  }

  /**
   * What a step held that the server also needs, and how long since it the server has had it free.
   * On the server's thread a step holds the event loop and the writer from the end of the last rest
   * on. In a thread of its own it holds the writer only, for its transaction; the next batch's
   * preparing since then (reading, encoding, the segment file) left both free, and counts as rest.
   */
  private heldBy(segment: BatchDone | null): { held: number; free: number } {
    const worked = performance.now() - this.workingSince;
    if (this.archiver.holdsEventLoop) return { held: worked, free: 0 };
    const held = Math.min(worked, segment?.write_ms ?? 0);
    return { held, free: worked - held };
  }

  /** The rest between two steps (at least restFactor times what the step held), cut short by stop(). */
  private async rest({ held, free }: { held: number; free: number }): Promise<void> {
    if (this.stopping) return;
    const ms = Math.max(0, Math.max(this.options.restMs, held * (this.options.restFactor ?? 4)) - free);
    await new Promise<void>((resolve) => {
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        resolve();
      }
      this.wake = done;
    });
    this.workingSince = performance.now();
  }
}
