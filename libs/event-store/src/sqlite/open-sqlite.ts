import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { ValidationError } from '@runledger/contracts';
import { Kysely } from 'kysely';
import { RoutedSqliteDialect, WriteRoute, WriteRouting } from './routed-sqlite-dialect';
import { Database } from './schema';

export const SQLITE_SYNCHRONOUS = ['OFF', 'NORMAL', 'FULL', 'EXTRA'] as const;
export type SqliteSynchronous = (typeof SQLITE_SYNCHRONOUS)[number];

export interface OpenSqliteOptions {
  /** file path; its folder is created. `:memory:` works for tests that need no second connection. */
  path: string;
  /**
   * The appends' durability: FULL (default) makes an acknowledged append
   * durable across power loss; NORMAL in WAL only risks the last transactions.
   * The connection's other writes (checkpoint snapshots, memory entries,
   * leases, the process registry) run at NORMAL at most: see openSqlite.
   */
  synchronous?: SqliteSynchronous;
  busyTimeoutMs?: number;
  /** WAL bytes kept after a checkpoint; bounds the -wal file on disk */
  journalSizeLimitBytes?: number;
}

export interface SqliteHandle<DB = Database> {
  db: Kysely<DB>;
  /**
   * The same connection, for writes nobody waits on promptly (checkpoint
   * snapshots, a projection's position): routed to the writer thread, they
   * start no commit of their own but ride in the next one, or commit alone
   * after a few milliseconds. Unrouted, the same as `db`. No transactions.
   */
  lazyDb: Kysely<DB>;
  raw: BetterSqlite3.Database;
  /** what appends commit at (OpenSqliteOptions.synchronous); the connection's own level is `connectionSynchronous` of it */
  appendSynchronous: SqliteSynchronous;
  /**
   * Send `db`'s writing statements to `route` (the writer thread's connection)
   * instead of running them here; null runs them here again. Reads and the raw
   * connection are not affected.
   */
  routeWrites(route: WriteRoute | null): void;
  close(): Promise<void>;
}

/**
 * The level of the connection's writes other than appends: at most NORMAL.
 * Those tables are derived from the log (checkpoint snapshots, memory
 * entries) or only matter while this process lives (leases, the process
 * registry), so losing their last transactions to a power cut loses nothing
 * the log cannot rebuild. In WAL, NORMAL is still atomic and survives a
 * process crash, and the next append's fsync of the WAL makes every frame
 * before it durable too; an fsync of their own would double a step's commits.
 */
export const connectionSynchronous = (appendSynchronous: SqliteSynchronous): SqliteSynchronous =>
  SQLITE_SYNCHRONOUS.indexOf(appendSynchronous) > SQLITE_SYNCHRONOUS.indexOf('NORMAL')
    ? 'NORMAL'
    : appendSynchronous;

/** Most distinct SQL texts whose prepared statements kysely's side of the connection keeps. */
export const STATEMENT_CACHE_SIZE = 256;

/**
 * The connection as kysely sees it, keeping its prepared statements by SQL
 * text (least recently used out first): kysely prepares every query it runs,
 * and for the short queries of a task's step (memory, checkpoints, task
 * state) compiling the SQL again costs more than running it. A cached
 * statement that is still executing (an iterator a stream left open) is not
 * handed out twice: that query gets a fresh statement.
 */
export function withStatementCache(
  raw: BetterSqlite3.Database,
  size = STATEMENT_CACHE_SIZE,
): { prepare(sql: string): BetterSqlite3.Statement; close(): void } {
  const cache = new Map<string, BetterSqlite3.Statement>();
  return {
    close: () => raw.close(),
    prepare(sql) {
      const cached = cache.get(sql);
      if (cached && !cached.busy) {
        cache.delete(sql);
        cache.set(sql, cached);
        return cached;
      }
      const statement = raw.prepare(sql);
      if (!cached) {
        cache.set(sql, statement);
        if (cache.size > size) cache.delete(cache.keys().next().value!);
      }
      return statement;
    },
  };
}

/**
 * One connection, shared by kysely (schema, migrations, reads) and the raw
 * prepared statements of the append path. better-sqlite3 is synchronous, so a
 * raw transaction runs start to finish without interleaving with a kysely
 * query on the same connection. Do not hold a kysely transaction open across
 * awaits on this handle: an append would run inside it.
 */
export function openSqlite<DB = Database>(options: OpenSqliteOptions): SqliteHandle<DB> {
  const {
    path,
    synchronous = 'FULL',
    busyTimeoutMs = 5000,
    journalSizeLimitBytes = 64 * 1024 * 1024,
  } = options;
  if (!SQLITE_SYNCHRONOUS.includes(synchronous))
    throw new ValidationError(`synchronous must be one of ${SQLITE_SYNCHRONOUS.join(', ')}`);
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const raw = new BetterSqlite3(path, { timeout: busyTimeoutMs });
  // a new database hands pages freed by archiving back to the file system (PRAGMA incremental_vacuum);
  // the mode can only be chosen before the first table exists, and costs nothing until it is used
  if (Number(raw.pragma('page_count', { simple: true })) === 0) raw.pragma('auto_vacuum = INCREMENTAL');
  raw.pragma('journal_mode = WAL');
  raw.pragma(`synchronous = ${connectionSynchronous(synchronous)}`);
  raw.pragma(`busy_timeout = ${Math.trunc(busyTimeoutMs)}`);
  raw.pragma('foreign_keys = ON');
  raw.pragma(`journal_size_limit = ${Math.trunc(journalSizeLimitBytes)}`);
  const statements = withStatementCache(raw);
  const routing = new WriteRouting();
  const db = new Kysely<DB>({
    dialect: new RoutedSqliteDialect(
      (sql) => statements.prepare(sql),
      () => statements.close(),
      routing,
    ),
  });
  // its dialect closes nothing: the connection is `db`'s to close
  const lazyDb = new Kysely<DB>({
    dialect: new RoutedSqliteDialect(
      (sql) => statements.prepare(sql),
      () => undefined,
      routing,
      true,
    ),
  });
  let closed = false;
  return {
    db,
    lazyDb,
    raw,
    appendSynchronous: synchronous,
    routeWrites(route) {
      routing.route = route;
    },
    async close() {
      if (closed) return;
      closed = true;
      await lazyDb.destroy();
      // kysely's destroy closes the better-sqlite3 connection too
      await db.destroy();
    },
  };
}
