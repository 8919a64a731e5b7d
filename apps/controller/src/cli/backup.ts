import { existsSync, mkdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { ValidationError } from '@runledger/contracts';
import {
  CatalogDatabase,
  Database as EventsDatabase,
  LAST_EVENT_POSITION,
  catalogFile,
  SqliteDataKeys,
  dataKeysPath,
  fsyncPath,
  openCopiesPg,
  openCopiesThrough,
  openedPg,
  openedThrough,
  isPostgresUrl,
  openPostgres,
  readSegmentFile,
  segmentFile,
  segmentFolder,
  writeSegmentFile,
} from '@runledger/event-store';
import { LogVerification, verifyLog } from '@runledger/state-store';
import Database from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import { AppConfig } from '../config';

export interface BackupResult {
  file: string;
  bytes: number;
  /** events in the copy: its highest position */
  events: number;
  /** archive segments the copy records, copied into `<file>.archive` beside it */
  segments: number;
}

/** Pages copied per step once the copy has begun: all that is left, so a busy writer cannot restart it for ever. */
const ALL_PAGES = 1 << 30;

/**
 * SQLite's online backup of RUNLEDGER_DB into `file`, taken on a read-only connection while the
 * server keeps writing (WAL readers do not block writers): the copy is the database as one
 * committed transaction left it. Written beside `file` under a temporary name, synced, then renamed
 * into place, so `file` is either absent or whole.
 */
export async function backupDatabase(config: AppConfig, file: string, cwd: string): Promise<BackupResult> {
  if (isPostgresUrl(config.RUNLEDGER_DB))
    throw new ValidationError(
      'backup copies a SQLite database; on PostgreSQL use pg_dump (see docs/backup.md): ' +
        `pg_dump --format=custom --schema=${config.RUNLEDGER_PG_SCHEMA} --file=<file> <url>`,
    );
  const source = resolve(cwd, config.RUNLEDGER_DB);
  const target = resolve(cwd, file);
  if (!existsSync(source)) throw new ValidationError(`backup: no database at ${source}`);
  if (existsSync(target)) throw new ValidationError(`backup: ${target} exists; name a new file`);
  if (target === source) throw new ValidationError('backup: the copy cannot be the database itself');
  const partial = `${target}.partial-${process.pid}`;
  try {
    const { events, segments } = await copyInto(source, partial);
    // the copy's archive: the segments it records (immutable once recorded), beside it under its name
    if (segments.length > 0) mkdirSync(segmentFolder(target), { recursive: true });
    for (const id of segments) {
      const from = segmentFile(segmentFolder(source), id);
      if (!existsSync(from))
        throw new ValidationError(
          `backup: archive segment ${id} was restored away while copying; run it again`,
        );
      writeSegmentFile(segmentFile(segmentFolder(target), id), readSegmentFile(from));
    }
    await copyCatalog(source, target);
    fsyncPath(partial);
    renameSync(partial, target);
    fsyncPath(dirname(target));
    return { file: target, bytes: statSync(target).size, events, segments: segments.length };
  } catch (err) {
    rmSync(partial, { force: true });
    rmSync(segmentFolder(target), { recursive: true, force: true });
    throw err;
  }
}

/**
 * The archive's catalog (`<db>.archive/catalog.db`, when there is one) copied beside the backup's
 * segments, after the database: a move into the catalog copies there before it deletes live, so a
 * task the live copy lost to a move meanwhile is in this later copy (one in both reads once).
 */
async function copyCatalog(source: string, target: string): Promise<void> {
  const from = catalogFile(source);
  if (!existsSync(from)) return;
  const to = catalogFile(target);
  mkdirSync(dirname(to), { recursive: true });
  const partial = `${to}.partial-${process.pid}`;
  const db = new Database(from, { readonly: true, fileMustExist: true });
  try {
    await db.backup(partial, { progress: () => ALL_PAGES });
  } finally {
    db.close();
  }
  const copy = new Database(partial, { fileMustExist: true });
  try {
    copy.pragma('journal_mode = DELETE');
  } finally {
    copy.close();
  }
  fsyncPath(partial);
  renameSync(partial, to);
  fsyncPath(dirname(to));
}

/** The online backup of `source` into `file`, made a single file; returns how many events it holds and its segments. */
async function copyInto(source: string, file: string): Promise<{ events: number; segments: string[] }> {
  const db = new Database(source, { readonly: true, fileMustExist: true });
  try {
    await db.backup(file, { progress: () => ALL_PAGES });
  } finally {
    db.close();
  }
  // a copy of a WAL database is one too: made a single self-contained file again (a server opening
  // it turns WAL back on), it can be moved, uploaded or opened read-only with nothing beside it
  const copy = new Database(file, { fileMustExist: true });
  try {
    copy.pragma('journal_mode = DELETE');
    // a database from before DropEventsAutoincrement keeps the highest position given in sqlite_sequence
    const hasFloor = copy
      .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'event_position_floor'")
      .get();
    const { position } = copy
      .prepare(
        hasFloor
          ? `SELECT ${LAST_EVENT_POSITION} AS position`
          : "SELECT max((SELECT max(position) FROM events), coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)) AS position",
      )
      .get() as { position: number | null };
    // a database from before the archive has no segments to copy
    const hasArchive = copy
      .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'archive_segments'")
      .get();
    const segments = hasArchive
      ? (copy.prepare('SELECT segment_id FROM archive_segments').all() as { segment_id: string }[]).map(
          (r) => r.segment_id,
        )
      : [];
    return { events: position ?? 0, segments };
  } finally {
    copy.close();
  }
}

/** verifyLog on a SQLite file opened read-only, or on a PostgreSQL database (its RUNLEDGER_PG_SCHEMA). */
export async function verifyDatabase(
  config: AppConfig,
  target: string,
  cwd: string,
): Promise<LogVerification> {
  if (isPostgresUrl(target)) {
    const handle = openPostgres({ url: target, schema: config.RUNLEDGER_PG_SCHEMA, maxConnections: 2 });
    try {
      return await verifyLog(
        handle.db,
        500,
        undefined,
        (events) => openedPg(handle.pool, events),
        (texts) => openCopiesPg(handle.pool, texts),
        handle.db as unknown as Kysely<CatalogDatabase>,
      );
    } finally {
      await handle.close();
    }
  }
  const path = resolve(cwd, target);
  if (!existsSync(path)) throw new ValidationError(`verify: no file at ${path}`);
  let raw: Database.Database;
  try {
    raw = new Database(path, { readonly: true, fileMustExist: true });
    raw.prepare('SELECT 1 FROM events LIMIT 1').get();
  } catch (err) {
    throw new ValidationError(`verify: ${path} is not a Runledger database (${(err as Error).message})`);
  }
  // the archive's catalog beside it, when there is one: tasks archived long ago are verified from there
  const catalog = existsSync(catalogFile(path));
  if (catalog) raw.prepare('ATTACH DATABASE ? AS catalog').run(catalogFile(path));
  const db = new Kysely<EventsDatabase>({ dialect: new SqliteDialect({ database: raw }) });
  // a backup has no key file of its own unless one was put beside it: its sealed content reads erased
  const keys = new SqliteDataKeys(dataKeysPath(path));
  try {
    return await verifyLog(
      db,
      500,
      async (id) => readSegmentFile(segmentFile(segmentFolder(path), id)),
      async (events) => openedThrough(keys, events),
      async (texts) => openCopiesThrough(keys, texts),
      catalog ? (db as unknown as Kysely<CatalogDatabase>) : null,
    );
  } finally {
    keys.close();
    await db.destroy();
  }
}
