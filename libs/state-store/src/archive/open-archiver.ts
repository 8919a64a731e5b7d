import { Database as EventsDatabase, attachCatalog, segmentFolder } from '@runledger/event-store';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import { StateStoreDatabase } from '../schema';
import { Archiver, ArchiverOptions } from './archiver';

export interface ArchiveAccess {
  archiver: Archiver;
  close(): Promise<void>;
}

/**
 * An archiver on a SQLite file, on a connection of its own: its write transactions (BEGIN IMMEDIATE
 * across several statements) must not share the store's connection, where an append would run
 * inside them. Appends of the store wait out each short batch in their busy handling. The archive's
 * catalog (`<db>.archive/catalog.db`, created here when missing) is attached to it as `catalog`.
 */
export function openSqliteArchiver(
  path: string,
  options: Omit<ArchiverOptions, 'folder'> & { busyTimeoutMs?: number } = {},
): ArchiveAccess {
  const raw = new BetterSqlite3(path, { fileMustExist: true, timeout: options.busyTimeoutMs ?? 30_000 });
  raw.pragma('journal_mode = WAL');
  // An archive transaction need not be durable: its segment file is synced before it, and one lost to
  // a power cut leaves the events live and the file unrecorded (an orphan, removed later). A restore
  // removes a file after its commit, so it commits with FULL (Archiver.restore).
  raw.pragma('synchronous = NORMAL');
  raw.pragma('foreign_keys = ON');
  // the archive's catalog, where records of tasks archived long ago move (the second tier)
  try {
    attachCatalog(raw);
  } catch (err) {
    raw.close();
    throw err;
  }
  const db = new Kysely<StateStoreDatabase>({ dialect: new SqliteDialect({ database: raw }) });
  return {
    archiver: new Archiver(db, { ...options, folder: segmentFolder(raw.name), exec: (s) => raw.exec(s) }),
    close: () => db.destroy(),
  };
}

/** An archiver on a PostgreSQL database's pool: segments are rows there. */
export function postgresArchiver(
  db: Kysely<EventsDatabase>,
  options: Omit<ArchiverOptions, 'folder'> = {},
): Archiver {
  return new Archiver(db as unknown as Kysely<StateStoreDatabase>, { ...options, folder: null });
}
