import { randomBytes } from 'node:crypto';
import { existsSync, linkSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import { ArchivedTasksTable, Database } from '../sqlite/schema';
import { fsyncPath, segmentFolder } from './segment';

/**
 * The archive's catalog: the second tier of retention. Tasks archived long enough ago leave the live
 * `tasks` and `archived_tasks` tables for `catalog_tasks` and `catalog_archived_tasks` (the same
 * columns), so the live database stops growing with the history. The tables have names of their
 * own on both databases, so one SQL text names live and catalog tables alike: on PostgreSQL they
 * are tables of the same schema (migration CreateArchiveCatalog); on SQLite they live in a file of
 * their own beside the archive's segments, `<db>.archive/catalog.db`, attached to the connections
 * that read or move them as `catalog` (SQLite finds an unqualified table in an attached database).
 */
export interface CatalogTables {
  catalog_archived_tasks: ArchivedTasksTable;
}

export type CatalogDatabase = Database & CatalogTables;

/** `<db>.archive/catalog.db`: a SQLite database's catalog. */
export const catalogFile = (databasePath: string): string => join(segmentFolder(databasePath), 'catalog.db');

/**
 * The catalog for readers: a database that names the live tables and the catalog's (see
 * CatalogTables). On PostgreSQL the storage's own pool. On SQLite a connection of its own to the live
 * file with the catalog attached, opened by the first read that finds the catalog file (created
 * whole by the first archiver that opens; until then nothing is catalogued).
 */
export interface CatalogReader {
  /** null while the database has no catalog: nothing is catalogued */
  db(): Kysely<CatalogDatabase> | null;
  /**
   * `body` on a database that may write the catalog's rows (an erasure scrubs catalogued summaries);
   * not run, and null, while there is no catalog. SQLite: a connection of its own for the call.
   */
  write<T>(body: (db: Kysely<CatalogDatabase>) => Promise<T>): Promise<T | null>;
  close(): Promise<void>;
}

export function postgresCatalog(db: Kysely<Database>): CatalogReader {
  const catalog = db as unknown as Kysely<CatalogDatabase>;
  return { db: () => catalog, write: (body) => body(catalog), close: async () => undefined };
}

export function sqliteCatalog(databasePath: string, busyTimeoutMs = 5000): CatalogReader {
  let db: Kysely<CatalogDatabase> | null = null;
  const file = databasePath === ':memory:' || databasePath === '' ? null : catalogFile(databasePath);
  return {
    db() {
      if (db || !file || !existsSync(file)) return db;
      const raw = new BetterSqlite3(databasePath, { fileMustExist: true, timeout: busyTimeoutMs });
      try {
        attachCatalog(raw);
        raw.pragma('query_only = ON');
      } catch (err) {
        raw.close();
        throw err;
      }
      db = new Kysely<CatalogDatabase>({ dialect: new SqliteDialect({ database: raw }) });
      return db;
    },
    async write(body) {
      if (!file || !existsSync(file)) return null;
      const raw = new BetterSqlite3(databasePath, { fileMustExist: true, timeout: busyTimeoutMs });
      const writer = new Kysely<CatalogDatabase>({ dialect: new SqliteDialect({ database: raw }) });
      try {
        attachCatalog(raw);
        return await body(writer);
      } finally {
        await writer.destroy();
      }
    },
    async close() {
      await db?.destroy();
      db = null;
    },
  };
}

/**
 * Attach the live database's catalog to one of its connections as `catalog`, creating the catalog
 * first when there is none. Its commits are synced (synchronous FULL): a move out of the live tables
 * deletes the live rows only after the catalog's copy is durable.
 */
export function attachCatalog(raw: BetterSqlite3.Database): void {
  const file = catalogFile(raw.name);
  if (!existsSync(file)) createCatalogFile(raw, file);
  raw.prepare('ATTACH DATABASE ? AS catalog').run(file);
  raw.pragma('catalog.synchronous = FULL');
}

/**
 * The catalog file, whole or not at all: its tables are built in a temporary file that is then
 * linked under the catalog's name (a link fails when another process made one meanwhile, and that
 * one is kept). Columns are the live tables' (CREATE TABLE AS keeps names and types); columns the
 * live tables gain later are added by the archiver before a move (syncCatalogColumns).
 */
function createCatalogFile(live: BetterSqlite3.Database, file: string): void {
  mkdirSync(dirname(file), { recursive: true });
  const partial = `${file}.${randomBytes(6).toString('hex')}.partial`;
  const raw = new BetterSqlite3(partial);
  try {
    raw.pragma('journal_mode = WAL');
    raw.prepare('ATTACH DATABASE ? AS live').run(live.name);
    raw.exec(`
      CREATE TABLE main.catalog_tasks AS SELECT * FROM live.tasks WHERE 0;
      CREATE UNIQUE INDEX main.catalog_tasks_id ON catalog_tasks (task_id);
      CREATE INDEX main.catalog_tasks_created_idx ON catalog_tasks (created_at, task_id);
      CREATE INDEX main.catalog_tasks_status_created_idx ON catalog_tasks (status, created_at, task_id);
      CREATE INDEX main.catalog_tasks_session_created_idx ON catalog_tasks (session_id, created_at, task_id);
      CREATE INDEX main.catalog_tasks_idempotency_idx ON catalog_tasks (idempotency_key) WHERE idempotency_key IS NOT NULL;
      CREATE TABLE main.catalog_archived_tasks AS SELECT * FROM live.archived_tasks WHERE 0;
      CREATE UNIQUE INDEX main.catalog_archived_tasks_id ON catalog_archived_tasks (task_id);
      CREATE INDEX main.catalog_archived_tasks_segment_idx ON catalog_archived_tasks (segment_id);
      DETACH DATABASE live;
    `);
    raw.close();
    fsyncPath(partial);
    try {
      linkSync(partial, file);
      fsyncPath(dirname(file));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  } finally {
    if (raw.open) raw.close();
    rmSync(partial, { force: true });
  }
}

/**
 * A SQLite database's catalog file, read synchronously on a connection of its own (opened once the
 * file exists): for the append path and a rebuild, which run inside a transaction of the live
 * connection, where nothing can be attached.
 */
export class SqliteCatalogFile {
  private raw: BetterSqlite3.Database | null = null;
  private stmt: {
    task: BetterSqlite3.Statement<[string], unknown>;
    segment: BetterSqlite3.Statement<[string], { task_id: string }>;
  } | null = null;
  private readonly file: string | null;

  constructor(databasePath: string) {
    this.file = databasePath === ':memory:' || databasePath === '' ? null : catalogFile(databasePath);
  }

  /**
   * Whether the task was archived into the catalog. An append to a catalogued task finds no live head
   * (its events and its `archived_tasks` row left the live database), so the insert trigger cannot
   * refuse it as it refuses an archived task's: the append path asks this for a stream's first events.
   */
  has(taskId: string): boolean {
    return this.statements()?.task.get(taskId) !== undefined;
  }

  /** The catalogued tasks of a segment. */
  tasksOfSegment(segmentId: string): string[] {
    return (
      this.statements()
        ?.segment.all(segmentId)
        .map((r) => r.task_id) ?? []
    );
  }

  private statements() {
    if (!this.stmt) {
      if (!this.file || !existsSync(this.file)) return null;
      this.raw = new BetterSqlite3(this.file, { fileMustExist: true, timeout: 5000 });
      this.stmt = {
        task: this.raw.prepare('SELECT 1 FROM catalog_archived_tasks WHERE task_id = ?'),
        segment: this.raw.prepare('SELECT task_id FROM catalog_archived_tasks WHERE segment_id = ?'),
      };
    }
    return this.stmt;
  }

  close(): void {
    this.raw?.close();
    this.raw = null;
    this.stmt = null;
  }
}
