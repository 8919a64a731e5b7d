import { setTimeout as sleep } from 'node:timers/promises';
import { RuntimeEvent } from '@runledger/contracts';
import type BetterSqlite3 from 'better-sqlite3';
import {
  EVENT_INSERT_COLUMNS,
  EventRowValues,
  StreamHead,
  UnpositionedEvent,
  ValidatedEvent,
  archivedTaskError,
  decideAppend,
  eventRowValues,
  positioned,
} from '../append-batch';
import { ExpectedSequence, FoldedState, LeaseToken } from '../event-store';
import { GroupResult } from '../group-committer';
import { InlineProjection } from '../inline-projection';
import { SqliteCatalogFile } from '../archive/archive-catalog';
import { checkLease } from './check-lease';
import { SqliteSynchronous, connectionSynchronous, withStatementCache } from './open-sqlite';
import { RoutedWriteResult } from './routed-sqlite-dialect';
import { NEXT_EVENT_POSITION } from './positions';
import { EventRow } from './rows';
import { PayloadSealer } from '../sealing/payload-sealer';
import { openEvents } from '../sealing/sealed-payload';
import { SqliteDataKeys } from '../sealing/sqlite-data-keys';

/** How a connection's appends store payloads: the database's key store, and whether to seal with it. */
export interface SqliteSealing {
  keys: SqliteDataKeys;
  seal: boolean;
}

/** One validated append waiting for its group's transaction. Plain data: it crosses to the writer thread as is. */
export interface AppendRequest {
  kind?: 'append';
  taskId: string;
  batch: readonly ValidatedEvent[];
  expected: ExpectedSequence;
  lease?: LeaseToken;
  /** the writer's fold of the batch (AppendOptions.folded), when every event is as it folded it */
  folded?: FoldedState;
}

/**
 * A writing statement of the handle's kysely side, routed to the writer
 * thread (WriteRouting): it rides in the next group's transaction, in order
 * with the appends, so the thread is woken once per group, not per statement.
 */
export interface StatementRequest {
  kind: 'statement';
  sql: string;
  parameters: readonly unknown[];
}

export type GroupRequest = AppendRequest | StatementRequest;

export type AppendOutcome =
  { kind: 'retry'; originals: RuntimeEvent[]; version: number } | { kind: 'written'; events: RuntimeEvent[] };

export type GroupOutcome = AppendOutcome | { kind: 'executed'; result: RoutedWriteResult };

const isStatement = (r: GroupRequest): r is StatementRequest => r.kind === 'statement';

/** Buffers arrive as plain Uint8Arrays after the structured clone; SQLite binds them as blobs again. */
const asParameter = (v: unknown): unknown =>
  v instanceof Uint8Array && !Buffer.isBuffer(v) ? Buffer.from(v.buffer, v.byteOffset, v.byteLength) : v;

export const isBusy = (err: unknown): boolean => {
  const code = (err as { code?: unknown })?.code;
  return typeof code === 'string' && (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED'));
};

/** The database stayed locked for longer than the retry window. */
export class StoreBusyError extends Error {
  override readonly name = 'StoreBusyError';
}

/**
 * busy_timeout already waits inside SQLite; this outer loop covers what it
 * cannot (a busy snapshot, a checkpoint holding the lock past the timeout),
 * with jittered backoff so writers do not retry in lockstep.
 */
export async function withBusyRetry<T>(run: () => T, busyRetryMs: number): Promise<T> {
  const deadline = Date.now() + busyRetryMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return run();
    } catch (err) {
      if (!isBusy(err)) throw err;
      if (Date.now() >= deadline)
        throw new StoreBusyError(`database busy for more than ${busyRetryMs} ms`, { cause: err });
      await sleep(Math.min(1000, 5 * 2 ** Math.min(attempt, 8)) * (0.5 + Math.random()));
    }
  }
}

/**
 * The write side of SqliteEventStore on one connection: a group of appends in
 * one BEGIN IMMEDIATE transaction of prepared statements, each append in its
 * own SAVEPOINT (checked, inserted and projected on its own; a failure rolls
 * back only that append). Synchronous, so it runs the same on the main thread
 * or in the writer thread.
 */
/** what the insert trigger says of an archived task; the append path says the same of a catalogued one */
const CATALOGUED = new Error('task is archived');

export class SqliteAppendTransaction {
  private readonly stmt: {
    head: BetterSqlite3.Statement<
      [string, string, string],
      { version: number | null; session_id: string | null; last_type: string | null }
    >;
    byId: BetterSqlite3.Statement<[string], EventRow>;
    insert: BetterSqlite3.Statement<EventRowValues>;
    begin: BetterSqlite3.Statement<[]>;
    commit: BetterSqlite3.Statement<[]>;
    rollback: BetterSqlite3.Statement<[]>;
    savepoint: BetterSqlite3.Statement<[]>;
    release: BetterSqlite3.Statement<[]>;
    rollbackTo: BetterSqlite3.Statement<[]>;
    dataVersion: BetterSqlite3.Statement<[], number>;
  };
  /** whether the request running now has written anything (see runTogether) */
  private wrote = false;
  /** the database's data_version when the key store last looked for its file (see refreshKeys) */
  private keysLookedAt: number | null = null;
  /**
   * Set the appends' level before BEGIN and the connection's back after the
   * transaction (SQLite refuses the pragma inside one); null when they match.
   * Run with exec, not kept prepared: SQLite applies this pragma when it
   * compiles the statement, so a prepared copy's first run would do nothing.
   */
  private readonly level: { append: string; connection: string } | null;
  /** prepared routed statements by SQL text, kept as kysely's side of a connection keeps them */
  private readonly routed: { prepare(sql: string): BetterSqlite3.Statement };
  private readonly sealer: PayloadSealer | null;
  /** tasks archived into the catalog: their streams take no events (see SqliteCatalogFile.has) */
  private readonly catalog: SqliteCatalogFile;
  private readonly payloadText: ((e: UnpositionedEvent) => string) | undefined;

  constructor(
    private readonly raw: BetterSqlite3.Database,
    private readonly projections: readonly InlineProjection[],
    appendSynchronous: SqliteSynchronous,
    private readonly sealing: SqliteSealing | null = null,
  ) {
    this.sealer = sealing && new PayloadSealer(sealing.keys, sealing.seal);
    // pages freed by an erasure's refold (or any rewrite of a sealed row) are zeroed, not left readable
    if (sealing?.seal) raw.pragma('secure_delete = ON');
    this.payloadText = this.sealer ? (e) => this.sealer!.payloadText(e) : undefined;
    const connection = connectionSynchronous(appendSynchronous);
    this.level =
      connection === appendSynchronous
        ? null
        : {
            append: `PRAGMA synchronous = ${appendSynchronous}`,
            connection: `PRAGMA synchronous = ${connection}`,
          };
    this.routed = withStatementCache(raw);
    this.catalog = new SqliteCatalogFile(raw.name);
    this.stmt = {
      head: raw.prepare(
        `SELECT (SELECT max(sequence) FROM events WHERE task_id = ?) AS version,
                (SELECT session_id FROM events WHERE task_id = ? AND sequence = 1) AS session_id,
                (SELECT type FROM events WHERE task_id = ? ORDER BY sequence DESC LIMIT 1) AS last_type`,
      ),
      byId: raw.prepare('SELECT * FROM events WHERE event_id = ?'),
      insert: raw.prepare(
        `INSERT INTO events (position, ${EVENT_INSERT_COLUMNS}) VALUES (${NEXT_EVENT_POSITION}, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      begin: raw.prepare('BEGIN IMMEDIATE'),
      commit: raw.prepare('COMMIT'),
      rollback: raw.prepare('ROLLBACK'),
      savepoint: raw.prepare('SAVEPOINT append'),
      release: raw.prepare('RELEASE append'),
      rollbackTo: raw.prepare('ROLLBACK TO append'),
      dataVersion: raw.prepare('PRAGMA data_version').pluck() as BetterSqlite3.Statement<[], number>,
    };
  }

  /**
   * One transaction for the whole group. Throws (having rolled everything
   * back) only when the transaction itself failed: the lock could not be
   * taken (SQLITE_BUSY, for the caller to retry), or the connection broke.
   * `keyFileSeenElsewhere`: the group comes from another thread, one of whose
   * connections opened the key file (keyFileOpenedHere there).
   */
  run(requests: readonly GroupRequest[], keyFileSeenElsewhere = false): GroupResult<GroupOutcome>[] {
    // routed statements alone commit at the connection's level: they are derived writes, not appends
    if (!this.level || requests.every(isStatement)) return this.runGroup(requests, keyFileSeenElsewhere);
    this.raw.exec(this.level.append);
    try {
      return this.runGroup(requests, keyFileSeenElsewhere);
    } finally {
      this.raw.exec(this.level.connection);
    }
  }

  private runGroup(requests: readonly GroupRequest[], keyFileSeen: boolean): GroupResult<GroupOutcome>[] {
    if (requests.length === 1) return [this.runAlone(requests[0], keyFileSeen)];
    return this.runTogether(requests, keyFileSeen, false) ?? this.runTogether(requests, keyFileSeen, true)!;
  }

  /**
   * The group in one transaction. Without savepoints (`savepoints` false), a
   * request that fails leaves nothing to undo when it failed before it wrote:
   * an append refused by its checks (expected sequence, lease, archived task,
   * ids), or a statement (SQLite undoes a failed statement's own changes). An
   * append that fails once it wrote (an insert, a projection) rolls the whole
   * transaction back, and null says to run the group again with a savepoint
   * per request, where each failure rolls back only itself. Two statement
   * runs per request fewer in the common case, on the path every append
   * waits for.
   */
  private runTogether(
    requests: readonly GroupRequest[],
    keyFileSeen: boolean,
    savepoints: boolean,
  ): GroupResult<GroupOutcome>[] | null {
    const results: GroupResult<GroupOutcome>[] = [];
    this.stmt.begin.run();
    try {
      this.refreshKeys(requests, keyFileSeen);
      for (const request of requests) {
        if (savepoints) this.stmt.savepoint.run();
        this.wrote = false;
        let outcome: GroupOutcome;
        try {
          outcome = this.runOne(request);
        } catch (err) {
          // a busy or broken connection fails the group; an append's own failure only itself
          if (isBusy(err) || !this.raw.inTransaction) throw err;
          if (savepoints) {
            this.stmt.rollbackTo.run();
            this.stmt.release.run();
          } else if (this.wrote) {
            this.stmt.rollback.run();
            return null;
          }
          results.push({ ok: false, error: err });
          continue;
        }
        if (savepoints) this.stmt.release.run();
        results.push({ ok: true, value: outcome });
      }
      this.stmt.commit.run();
    } catch (err) {
      if (this.raw.inTransaction) this.stmt.rollback.run();
      throw err;
    }
    return results;
  }

  /** A group of one needs no savepoint: its failure rolls back the whole transaction. */
  private runAlone(request: GroupRequest, keyFileSeen: boolean): GroupResult<GroupOutcome> {
    this.stmt.begin.run();
    let outcome: GroupOutcome;
    try {
      this.refreshKeys([request], keyFileSeen);
      outcome = this.runOne(request);
    } catch (err) {
      if (this.raw.inTransaction) this.stmt.rollback.run();
      if (isBusy(err)) throw err;
      return { ok: false, error: err };
    }
    try {
      this.stmt.commit.run();
    } catch (err) {
      if (this.raw.inTransaction) this.stmt.rollback.run();
      throw err;
    }
    return { ok: true, value: outcome };
  }

  /**
   * An erasure committed by another connection (or process) is seen by this group: the key store
   * re-reads what changed. While its file does not exist, it is looked for only when something may
   * need it (SqliteDataKeys.refresh): another connection committed since the last look (data_version,
   * read inside this transaction for nothing), or `keyFileSeen`: a connection of the thread that
   * sent the group opened it. Statements alone need no keys.
   */
  private refreshKeys(requests: readonly GroupRequest[], keyFileSeen: boolean): void {
    const keys = this.sealing?.keys;
    if (!keys || requests.every(isStatement)) return;
    const version = this.stmt.dataVersion.get()!;
    keys.refresh(version !== this.keysLookedAt || keyFileSeen);
    this.keysLookedAt = version;
  }

  private runOne(request: GroupRequest): GroupOutcome {
    return isStatement(request) ? this.runStatement(request) : this.appendOne(request);
  }

  /** A routed statement, as kysely's SQLite driver would have run it on the main connection. */
  private runStatement({ sql, parameters }: StatementRequest): GroupOutcome {
    const stmt = this.routed.prepare(sql);
    const args = parameters.map(asParameter);
    if (stmt.reader) return { kind: 'executed', result: { rows: stmt.all(args) } };
    const { changes, lastInsertRowid } = stmt.run(args);
    return { kind: 'executed', result: { rows: [], changes, lastInsertRowid } };
  }

  private appendOne({ taskId, batch, expected, lease, folded }: AppendRequest): AppendOutcome {
    checkLease(this.raw, taskId, lease);
    const row = this.stmt.head.get(taskId, taskId, taskId);
    const head: StreamHead = {
      version: row?.version ?? 0,
      session_id: row?.session_id ?? null,
      last_type: row?.last_type ?? null,
    };
    if (head.version === 0 && this.catalog.has(taskId)) throw archivedTaskError(taskId, CATALOGUED);
    const decision = decideAppend(taskId, batch, expected, head, (id) => this.stmt.byId.get(id));
    if (decision.kind === 'retry') {
      const keys = this.sealing?.keys;
      return keys
        ? { ...decision, originals: openEvents(decision.originals, keys, keys.anyErased()) }
        : decision;
    }
    let written: RuntimeEvent[];
    this.wrote = true;
    try {
      written = decision.envelopes.map((e) => positioned(e, this.insert(e)));
    } catch (err) {
      throw archivedTaskError(taskId, err);
    }
    for (const projection of this.projections)
      projection.apply(this.raw, written, this.sealer ?? undefined, folded);
    return { kind: 'written', events: written };
  }

  /** Closes the catalog's connection, when one was opened; the transaction's own connection is its owner's. */
  close(): void {
    this.catalog.close();
  }

  private insert(e: UnpositionedEvent): number {
    const info = this.stmt.insert.run(...eventRowValues(e, this.payloadText));
    return Number(info.lastInsertRowid);
  }
}
