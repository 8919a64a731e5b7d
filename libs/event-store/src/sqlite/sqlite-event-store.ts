import { setTimeout as sleep } from 'node:timers/promises';
import { NewEvent, RuntimeEvent } from '@runledger/contracts';
import type BetterSqlite3 from 'better-sqlite3';
import { sql } from 'kysely';
import {
  StreamHead,
  UnpositionedEvent,
  ValidatedEvent,
  buildEnvelopes,
  checkExpected,
  checkOpen,
  resolveDuplicates,
  validateBatch,
} from '../append-batch';
import {
  AppendOptions,
  AppendResult,
  CommitListener,
  EventStore,
  ExpectedSequence,
  LeaseToken,
  ReadAllOptions,
  ReadStreamOptions,
  StoreHead,
} from '../event-store';
import { InlineProjection } from '../inline-projection';
import { checkLease } from './check-lease';
import { SqliteHandle } from './open-sqlite';
import { EventRow, rowToEvent } from './rows';

export interface SqliteEventStoreOptions {
  /** read models updated inside every append transaction, in this order */
  projections?: readonly InlineProjection[];
  /** how long SQLITE_BUSY is retried (beyond busy_timeout) before an append gives up */
  busyRetryMs?: number;
  /**
   * While someone listens to commits: how often to look for commits of other
   * connections to the file (another process), which are published too.
   * Default 200 ms; 0 turns it off.
   */
  foreignCommitPollMs?: number;
}

const PUBLISH_PAGE = 1000;

/** The database stayed locked for longer than the retry window. */
export class StoreBusyError extends Error {}

const isBusy = (err: unknown): boolean => {
  const code = (err as { code?: unknown })?.code;
  return typeof code === 'string' && (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED'));
};

type AppendOutcome =
  { kind: 'retry'; originals: RuntimeEvent[]; version: number } | { kind: 'written'; events: RuntimeEvent[] };

/**
 * EventStore on SQLite. The append path is one BEGIN IMMEDIATE transaction of
 * prepared statements on the raw better-sqlite3 connection (a kysely
 * transaction per append costs about 2x); reads go through kysely.
 *
 * Committed events are handed to `onCommitted` listeners (the EventBus) after
 * the commit returns, synchronously, so listeners see them in position order.
 */
export class SqliteEventStore extends EventStore {
  private readonly raw: BetterSqlite3.Database;
  private readonly projections: readonly InlineProjection[];
  private readonly busyRetryMs: number;
  private readonly stmt: {
    head: BetterSqlite3.Statement<
      [string, string, string],
      { version: number | null; session_id: string | null; last_type: string | null }
    >;
    byId: BetterSqlite3.Statement<[string], EventRow>;
    insert: BetterSqlite3.Statement<
      [string, string, string, number, string, string, string | null, string, string]
    >;
    maxPosition: BetterSqlite3.Statement<[], { position: number | null }>;
    /** positions after the first and before the second, at most PUBLISH_PAGE of them */
    between: BetterSqlite3.Statement<[number, number], EventRow>;
  };
  /** last position handed to commit listeners: they get every position after it, in order, once */
  private published: number;
  private readonly pollMs: number;
  private poll: { timer: NodeJS.Timeout; dataVersion: number } | null = null;
  private listeners = 0;
  private readonly appendTx: (
    taskId: string,
    batch: readonly ValidatedEvent[],
    expected: ExpectedSequence,
    lease: LeaseToken | undefined,
  ) => AppendOutcome;

  constructor(
    private readonly handle: SqliteHandle,
    options: SqliteEventStoreOptions = {},
  ) {
    super();
    this.raw = handle.raw;
    this.projections = options.projections ?? [];
    this.busyRetryMs = options.busyRetryMs ?? 60_000;
    this.stmt = {
      head: this.raw.prepare(
        `SELECT (SELECT max(sequence) FROM events WHERE task_id = ?) AS version,
                (SELECT session_id FROM events WHERE task_id = ? AND sequence = 1) AS session_id,
                (SELECT type FROM events WHERE task_id = ? ORDER BY sequence DESC LIMIT 1) AS last_type`,
      ),
      byId: this.raw.prepare('SELECT * FROM events WHERE event_id = ?'),
      insert: this.raw.prepare(
        `INSERT INTO events (event_id, task_id, session_id, sequence, type, payload, causation_id, correlation_id, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      maxPosition: this.raw.prepare('SELECT max(position) AS position FROM events'),
      between: this.raw.prepare(
        `SELECT * FROM events WHERE position > ? AND position < ? ORDER BY position LIMIT ${PUBLISH_PAGE}`,
      ),
    };
    this.published = this.stmt.maxPosition.get()?.position ?? 0;
    this.pollMs = options.foreignCommitPollMs ?? 200;
    this.appendTx = this.raw.transaction((taskId, batch, expected, lease) =>
      this.appendInTransaction(taskId, batch, expected, lease),
    ).immediate;
  }

  async append(taskId: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult> {
    const batch = validateBatch(taskId, events, options.expected);
    const outcome = await this.withBusyRetry(() =>
      this.appendTx(taskId, batch, options.expected, options.lease),
    );
    if (outcome.kind === 'retry') {
      return {
        nextExpectedSequence: outcome.version,
        positions: outcome.originals.map((e) => e.position),
        events: outcome.originals,
      };
    }
    this.publish(outcome.events);
    const last = outcome.events[outcome.events.length - 1];
    return {
      nextExpectedSequence: last.sequence,
      positions: outcome.events.map((e) => e.position),
      events: outcome.events,
    };
  }

  override onCommitted(listener: CommitListener): () => void {
    const remove = super.onCommitted(listener);
    if (++this.listeners === 1) {
      // a first listener hears from now on: what was committed before is for it to read
      this.published = Math.max(this.published, this.stmt.maxPosition.get()?.position ?? 0);
      this.startPolling();
    }
    let removed = false;
    return () => {
      if (removed) return;
      removed = true;
      remove();
      if (--this.listeners === 0) this.stopPolling();
    };
  }

  /**
   * Hand committed events to the listeners in position order with no gap: a
   * position below them that is not published yet was committed by another
   * connection (another process on the file) and is read and published first.
   * What was already published is never published again.
   */
  private publish(events: readonly RuntimeEvent[]): void {
    const fresh = events.filter((e) => e.position > this.published);
    if (fresh.length === 0) return;
    if (this.listeners > 0) this.publishUpTo(fresh[0].position);
    this.emitCommitted(fresh);
    this.published = fresh[fresh.length - 1].position;
  }

  /** Publish what is stored between the last published position and `before`, page by page. */
  private publishUpTo(before: number): void {
    while (this.published + 1 < before) {
      const page = this.stmt.between.all(this.published, before).map(rowToEvent);
      if (page.length === 0) return;
      this.emitCommitted(page);
      this.published = page[page.length - 1].position;
    }
  }

  /** Commits of other connections bump PRAGMA data_version; publish what they added. */
  private startPolling(): void {
    if (this.pollMs <= 0 || this.poll) return;
    const dataVersion = () => Number(this.raw.pragma('data_version', { simple: true }));
    const poll = { dataVersion: dataVersion(), timer: null as unknown as NodeJS.Timeout };
    poll.timer = setInterval(() => {
      try {
        const now = dataVersion();
        if (now === poll.dataVersion) return;
        this.publishUpTo((this.stmt.maxPosition.get()?.position ?? 0) + 1);
        poll.dataVersion = now;
      } catch {
        // the connection was closed under us (or is busy): the next tick, or the next append, catches up
        if (!this.raw.open) this.stopPolling();
      }
    }, this.pollMs);
    poll.timer.unref();
    this.poll = poll;
  }

  private stopPolling(): void {
    if (this.poll) clearInterval(this.poll.timer);
    this.poll = null;
  }

  private appendInTransaction(
    taskId: string,
    batch: readonly ValidatedEvent[],
    expected: ExpectedSequence,
    lease: LeaseToken | undefined,
  ): AppendOutcome {
    const row = this.stmt.head.get(taskId, taskId, taskId);
    const head: StreamHead = {
      version: row?.version ?? 0,
      session_id: row?.session_id ?? null,
      last_type: row?.last_type ?? null,
    };
    if (batch.some((e) => e.id_supplied)) {
      const stored = batch.map((e) => (e.id_supplied ? this.stmt.byId.get(e.event_id) : undefined));
      if (resolveDuplicates(taskId, batch, stored) === 'retry') {
        return { kind: 'retry', originals: (stored as EventRow[]).map(rowToEvent), version: head.version };
      }
    }
    checkLease(this.raw, taskId, lease);
    checkExpected(taskId, expected, head.version);
    checkOpen(taskId, head);
    const envelopes = buildEnvelopes(taskId, batch, head, new Date().toISOString());
    const written = envelopes.map((e) => ({ ...e, position: this.insert(e) }) as RuntimeEvent);
    for (const projection of this.projections) projection.apply(this.raw, written);
    return { kind: 'written', events: written };
  }

  private insert(e: UnpositionedEvent): number {
    const info = this.stmt.insert.run(
      e.event_id,
      e.task_id,
      e.session_id,
      e.sequence,
      e.type,
      JSON.stringify(e.payload),
      e.causation_id,
      e.correlation_id,
      e.created_at,
    );
    return Number(info.lastInsertRowid);
  }

  /**
   * busy_timeout already waits inside SQLite; this outer loop covers what it
   * cannot (a busy snapshot, a checkpoint holding the lock past the timeout),
   * with jittered backoff so writers do not retry in lockstep.
   */
  private async withBusyRetry<T>(run: () => T): Promise<T> {
    const deadline = Date.now() + this.busyRetryMs;
    for (let attempt = 0; ; attempt++) {
      try {
        return run();
      } catch (err) {
        if (!isBusy(err)) throw err;
        if (Date.now() >= deadline)
          throw new StoreBusyError(`database busy for more than ${this.busyRetryMs} ms`, { cause: err });
        await sleep(Math.min(1000, 5 * 2 ** Math.min(attempt, 8)) * (0.5 + Math.random()));
      }
    }
  }

  async readStream(taskId: string, options: ReadStreamOptions = {}): Promise<RuntimeEvent[]> {
    const rows = await this.handle.db
      .selectFrom('events')
      .selectAll()
      .where('task_id', '=', taskId)
      .where('sequence', '>', options.after_seq ?? 0)
      .orderBy('sequence')
      .$if(options.limit !== undefined, (q) => q.limit(options.limit!))
      .execute();
    return rows.map(rowToEvent);
  }

  async readAll(options: ReadAllOptions = {}): Promise<RuntimeEvent[]> {
    const rows = await this.handle.db
      .selectFrom('events')
      .selectAll()
      .where('position', '>', options.after_position ?? 0)
      .$if(options.task_id !== undefined, (q) => q.where('task_id', '=', options.task_id!))
      .$if(options.types !== undefined, (q) =>
        q.where('type', 'in', options.types!.length > 0 ? [...options.types!] : [sql<string>`NULL`]),
      )
      .orderBy('position')
      .$if(options.limit !== undefined, (q) => q.limit(options.limit!))
      .execute();
    return rows.map(rowToEvent);
  }

  async head(): Promise<StoreHead> {
    const row = await this.handle.db
      .selectFrom('events')
      .select((eb) => [eb.fn.max('position').as('position'), eb.fn.countAll<number>().as('event_count')])
      .executeTakeFirstOrThrow();
    return { position: Number(row.position ?? 0), event_count: Number(row.event_count) };
  }

  async streamVersion(taskId: string): Promise<number> {
    const row = await this.handle.db
      .selectFrom('events')
      .select((eb) => eb.fn.max('sequence').as('version'))
      .where('task_id', '=', taskId)
      .executeTakeFirst();
    return Number(row?.version ?? 0);
  }

  /** The store does not own the connection: whoever opened it closes it. */
  async close(): Promise<void> {}
}

const REBUILD_PAGE = 1000;

/**
 * Empty a projection and refold the whole log into it, in one write
 * transaction so appends wait and nobody sees it half built. Returns the
 * number of events folded.
 */
export function rebuildProjection(raw: BetterSqlite3.Database, projection: InlineProjection): number {
  const page = raw.prepare<[number, number], EventRow>(
    'SELECT * FROM events WHERE position > ? ORDER BY position LIMIT ?',
  );
  return raw
    .transaction(() => {
      projection.reset(raw);
      let count = 0;
      for (let after = 0; ;) {
        const events = page.all(after, REBUILD_PAGE).map(rowToEvent);
        if (events.length === 0) return count;
        projection.apply(raw, events);
        count += events.length;
        after = events[events.length - 1].position;
      }
    })
    .immediate();
}
