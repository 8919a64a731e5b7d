import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { ValidationError } from '@runledger/contracts';
import { Kysely, SqliteDialect } from 'kysely';
import { Database } from './schema';

export const SQLITE_SYNCHRONOUS = ['OFF', 'NORMAL', 'FULL', 'EXTRA'] as const;
export type SqliteSynchronous = (typeof SQLITE_SYNCHRONOUS)[number];

export interface OpenSqliteOptions {
  /** file path; its folder is created. `:memory:` works for tests that need no second connection. */
  path: string;
  /** FULL (default) makes an acknowledged append durable across power loss; NORMAL in WAL only risks the last transactions */
  synchronous?: SqliteSynchronous;
  busyTimeoutMs?: number;
  /** WAL bytes kept after a checkpoint; bounds the -wal file on disk */
  journalSizeLimitBytes?: number;
}

export interface SqliteHandle<DB = Database> {
  db: Kysely<DB>;
  raw: BetterSqlite3.Database;
  close(): Promise<void>;
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
  raw.pragma('journal_mode = WAL');
  raw.pragma(`synchronous = ${synchronous}`);
  raw.pragma(`busy_timeout = ${Math.trunc(busyTimeoutMs)}`);
  raw.pragma('foreign_keys = ON');
  raw.pragma(`journal_size_limit = ${Math.trunc(journalSizeLimitBytes)}`);
  const db = new Kysely<DB>({ dialect: new SqliteDialect({ database: raw }) });
  let closed = false;
  return {
    db,
    raw,
    async close() {
      if (closed) return;
      closed = true;
      // kysely's destroy closes the better-sqlite3 connection too
      await db.destroy();
    },
  };
}
