import { Kysely, Migration, MigrationProvider, MigrationResultSet, Migrator, sql } from 'kysely';
import * as createEvents from './1795334683648-CreateEvents';
import * as createTasks from './1795334683649-CreateTasks';
import * as createCheckpoints from './1795334683650-CreateCheckpoints';
import * as createMemoryEntries from './1795334683660-CreateMemoryEntries';
import * as createProcesses from './1795334683670-CreateProcesses';
import * as createTaskLeases from './1795334683680-CreateTaskLeases';
import * as createEventLogHead from './1795334683690-CreateEventLogHead';

import { isPostgres } from './dialect';

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
};

class StaticMigrationProvider implements MigrationProvider {
  async getMigrations(): Promise<Record<string, Migration>> {
    return { ...MIGRATIONS };
  }
}

export class MigrationError extends Error {}

/**
 * Bring a database to the latest schema. Unordered migrations are allowed
 * because several people add files at once: one with an older timestamp that
 * lands later still runs.
 */
export async function migrateToLatest<DB>(db: Kysely<DB>): Promise<MigrationResultSet> {
  const migrator = new Migrator({
    db,
    provider: new StaticMigrationProvider(),
    allowUnorderedMigrations: true,
    // kysely looks for its own tables in every schema; on PostgreSQL each schema keeps its own
    ...(isPostgres(db) ? { migrationTableSchema: await currentSchema(db) } : {}),
  });
  const result = await migrator.migrateToLatest();
  if (result.error) {
    const failed = result.results?.find((r) => r.status === 'Error')?.migrationName ?? 'unknown';
    throw new MigrationError(
      `migration ${failed} failed: ${(result.error as Error).message ?? String(result.error)}`,
      { cause: result.error },
    );
  }
  return result;
}
