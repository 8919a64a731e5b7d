import { closeSync, existsSync, fsyncSync, openSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { ValidationError } from '@runledger/contracts';
import { Database as EventsDatabase, isPostgresUrl, openPostgres } from '@runledger/event-store';
import { LogVerification, verifyLog } from '@runledger/state-store';
import Database from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import { AppConfig } from '../config';

export interface BackupResult {
  file: string;
  bytes: number;
  /** events in the copy: its highest position */
  events: number;
}

/** Pages copied per step once the copy has begun: all that is left, so a busy writer cannot restart it for ever. */
const ALL_PAGES = 1 << 30;

function fsyncPath(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

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
    const events = await copyInto(source, partial);
    fsyncPath(partial);
    renameSync(partial, target);
    fsyncPath(dirname(target));
    return { file: target, bytes: statSync(target).size, events };
  } catch (err) {
    rmSync(partial, { force: true });
    throw err;
  }
}

/** The online backup of `source` into `file`, made a single file; returns how many events it holds. */
async function copyInto(source: string, file: string): Promise<number> {
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
    const { position } = copy.prepare('SELECT max(position) AS position FROM events').get() as {
      position: number | null;
    };
    return position ?? 0;
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
      return await verifyLog(handle.db);
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
  try {
    return await verifyLog(db);
  } finally {
    await db.destroy();
  }
}
