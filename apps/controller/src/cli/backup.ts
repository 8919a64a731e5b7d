import { existsSync, mkdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { TERMINAL_STATUSES, ValidationError } from '@runledger/contracts';
import {
  Database as EventsDatabase,
  SCRUBBED_COPY,
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
 * A backup holds a sealed session's content only as ciphertext: its events and checkpoints are
 * sealed already, so the clear copies the read models keep (finished tasks' rows: input, result,
 * directive, stop detail, accept checks; memory texts) are replaced by SCRUBBED_COPY in the copy,
 * which is then vacuumed so no old page keeps them. `runledger rebuild` on a restored copy refolds
 * them from the log (through the key file). A session is sealed when the key file knows it (a key
 * or an erasure). Tasks not finished keep their rows: a restored copy resumes them from there.
 */
function sealedSessionsOut(copy: Database.Database, source: string): void {
  const keys = new SqliteDataKeys(dataKeysPath(source));
  try {
    keys.refresh();
    const hasTasks = copy
      .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tasks'")
      .get();
    if (!hasTasks) return;
    const sessions = (copy.prepare('SELECT DISTINCT session_id FROM tasks').all() as { session_id: string }[])
      .map((r) => r.session_id)
      .filter((s) => keys.state(s) !== undefined);
    if (sessions.length === 0) return;
    const finished = TERMINAL_STATUSES.map((s) => `'${s}'`).join(', ');
    const placeholder = SCRUBBED_COPY;
    const tasks = copy.prepare(
      `UPDATE tasks SET input = ?, last_directive = NULL, accept_checks = '[]',
         stop_detail = CASE WHEN stop_detail IS NULL THEN NULL ELSE ? END,
         result = CASE WHEN result IS NULL THEN NULL ELSE ? END
       WHERE session_id = ? AND status IN (${finished})`,
    );
    const hasMemory = copy
      .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'memory_entries'")
      .get();
    const memory = hasMemory
      ? copy.prepare("UPDATE memory_entries SET text = ?, metadata = '{}' WHERE session_id = ?")
      : null;
    copy.transaction(() => {
      for (const session of sessions) {
        tasks.run(placeholder, placeholder, placeholder, session);
        memory?.run(placeholder, session);
      }
    })();
    copy.exec('VACUUM');
  } finally {
    keys.close();
  }
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
    sealedSessionsOut(copy, source);
    const { position } = copy
      .prepare(
        "SELECT max((SELECT max(position) FROM events), coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)) AS position",
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
    );
  } finally {
    keys.close();
    await db.destroy();
  }
}
