import { Kysely, Migration, MigrationProvider, MigrationResultSet, Migrator, sql } from 'kysely';
import * as createEvents from './1795334683648-CreateEvents';
import * as createTasks from './1795334683649-CreateTasks';
import * as createCheckpoints from './1795334683650-CreateCheckpoints';
import * as createMemoryEntries from './1795334683660-CreateMemoryEntries';
import * as createProcesses from './1795334683670-CreateProcesses';
import * as createTaskLeases from './1795334683680-CreateTaskLeases';
import * as createEventLogHead from './1795334683690-CreateEventLogHead';
import * as addEventSchemaVersion from './1795334683741-AddEventSchemaVersion';
import * as createArchive from './1795334683800-CreateArchive';
import * as createModelUsage from './1795334683810-CreateModelUsage';
import * as addReceivedRootIndex from './1795334683820-AddReceivedRootIndex';
import * as createDataKeys from './1795334683830-CreateDataKeys';
import * as createArchiveCatalog from './1795334683860-CreateArchiveCatalog';
import * as createStreamKeys from './1795334683870-CreateStreamKeys';
import * as dropEventsAutoincrement from './1795334683900-DropEventsAutoincrement';
import * as narrowTaskLeases from './1795334683910-NarrowTaskLeases';
import * as createAppendGuard from './1795334683920-CreateAppendGuard';
import * as indexAppendGuard from './1795334683930-IndexAppendGuard';

import { isPostgres, isSqlite } from './dialect';

export { isPostgres, isSqlite } from './dialect';

const currentSchema = async <DB>(db: Kysely<DB>): Promise<string> =>
  (await sql<{ schema: string }>`SELECT current_schema() AS schema`.execute(db)).rows[0].schema;

/**
 * Every migration, by file name (`<epoch-ms>-<VerbNoun>`). Listed statically so
 * the build and jest need no directory scan; add a new file here as one line.
 */
export const MIGRATIONS: Readonly<Record<string, Migration>> = {
  '1795334683648-CreateEvents': createEvents,
  '1795334683649-CreateTasks': createTasks,
  '1795334683650-CreateCheckpoints': createCheckpoints,
  '1795334683660-CreateMemoryEntries': createMemoryEntries,
  '1795334683670-CreateProcesses': createProcesses,
  '1795334683680-CreateTaskLeases': createTaskLeases,
  '1795334683690-CreateEventLogHead': createEventLogHead,
  '1795334683741-AddEventSchemaVersion': addEventSchemaVersion,
  '1795334683800-CreateArchive': createArchive,
  '1795334683810-CreateModelUsage': createModelUsage,
  '1795334683820-AddReceivedRootIndex': addReceivedRootIndex,
  '1795334683830-CreateDataKeys': createDataKeys,
  '1795334683860-CreateArchiveCatalog': createArchiveCatalog,
  '1795334683870-CreateStreamKeys': createStreamKeys,
  '1795334683900-DropEventsAutoincrement': dropEventsAutoincrement,
  '1795334683910-NarrowTaskLeases': narrowTaskLeases,
  '1795334683920-CreateAppendGuard': createAppendGuard,
  '1795334683930-IndexAppendGuard': indexAppendGuard,
};

class StaticMigrationProvider implements MigrationProvider {
  async getMigrations(): Promise<Record<string, Migration>> {
    return { ...MIGRATIONS };
  }
}

export class MigrationError extends Error {}

const migratorFor = async <DB>(db: Kysely<DB>): Promise<Migrator> =>
  new Migrator({
    db,
    provider: new StaticMigrationProvider(),
    allowUnorderedMigrations: true,
    // kysely looks for its own tables in every schema; on PostgreSQL each schema keeps its own
    ...(isPostgres(db) ? { migrationTableSchema: await currentSchema(db) } : {}),
  });

/**
 * kysely locks migrations on PostgreSQL (an advisory lock in a transaction)
 * but not on SQLite, where each migration runs on its own: two processes
 * booting on a fresh file would both find it empty and both create its
 * tables. Here the whole run holds SQLite's write lock (BEGIN IMMEDIATE, which
 * waits out the busy timeout), so the second process reads the schema the
 * first committed, and a failed run leaves the file as it found it.
 */
async function migrateSqliteUnderWriteLock<DB>(db: Kysely<DB>): Promise<MigrationResultSet> {
  return db.connection().execute(async (connection) => {
    await sql`BEGIN IMMEDIATE`.execute(connection);
    let result: MigrationResultSet;
    try {
      result = await (await migratorFor(connection)).migrateToLatest();
    } catch (err) {
      await sql`ROLLBACK`.execute(connection);
      throw err;
    }
    await sql.raw(result.error ? 'ROLLBACK' : 'COMMIT').execute(connection);
    return result;
  });
}

/**
 * Bring a database to the latest schema, under a lock so that processes
 * booting together run each migration once. Unordered migrations are allowed
 * because several people add files at once: one with an older timestamp that
 * lands later still runs.
 */
export async function migrateToLatest<DB>(db: Kysely<DB>): Promise<MigrationResultSet> {
  const result = isSqlite(db)
    ? await migrateSqliteUnderWriteLock(db)
    : await (await migratorFor(db)).migrateToLatest();
  if (result.error) {
    const failed = result.results?.find((r) => r.status === 'Error')?.migrationName ?? 'unknown';
    throw new MigrationError(
      `migration ${failed} failed: ${(result.error as Error).message ?? String(result.error)}`,
      { cause: result.error },
    );
  }
  return result;
}
