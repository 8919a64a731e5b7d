import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NewEvent, RuntimeEvent } from '@runledger/contracts';
import { TestPostgres, describePostgres, useTestPostgres } from '@runledger/testing';
import {
  PostgresStorage,
  SqliteStorage,
  SqliteStorageOptions,
  Storage,
  createPostgresStorage,
  createSqliteStorage,
} from '../storage';

export interface TempStorage<S extends Storage = SqliteStorage> {
  storage: S;
  dir: string;
  path: string;
  dispose(): Promise<void>;
}

/** createSqliteStorage on a file in a fresh temp folder, removed by dispose. */
export async function createTempStorage(options: Partial<SqliteStorageOptions> = {}): Promise<TempStorage> {
  const dir = mkdtempSync(join(tmpdir(), 'runledger-state-'));
  const path = join(dir, 'runledger.db');
  const storage = await createSqliteStorage({ path, synchronous: 'NORMAL', ...options });
  return {
    storage,
    dir,
    path,
    async dispose() {
      await storage.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * createPostgresStorage on a fresh schema of the test file's database, dropped by dispose. The schema
 * is already migrated (see useTestPostgres), so the storage's own migration finds nothing to do: a
 * boot on an empty schema is covered by migrations.int, storage.module.int and the PostgreSQL servers
 * of the e2e suites.
 */
export async function createTempPgStorage(
  pg: TestPostgres,
  options: { sealPayloads?: boolean } = {},
): Promise<TempStorage<PostgresStorage>> {
  const schema = await pg.freshSchema();
  await schema.handle.close();
  const storage = await createPostgresStorage({
    url: schema.url,
    schema: schema.schema,
    maxConnections: 5,
    ...options,
  });
  return {
    storage,
    dir: schema.schema,
    path: schema.url,
    async dispose() {
      await storage.close();
      await schema.dispose();
    },
  };
}

/**
 * A storage spec, run on SQLite and on PostgreSQL (skipped with one line
 * where PostgreSQL is unreachable; see describePostgres): the same
 * behaviour, whichever driver.
 */
export function describeEachStorage(
  name: string,
  body: (open: () => Promise<TempStorage<Storage>>) => void,
): void {
  describe(`${name} on SQLite`, () => body(() => createTempStorage()));
  describePostgres(`${name} on PostgreSQL`, () => {
    const pg = useTestPostgres();
    body(() => createTempPgStorage(pg));
  });
}

/** Strip the envelope so prebuilt events (TaskLog) can be appended for real. */
export const asNew = (events: readonly RuntimeEvent[]): NewEvent[] =>
  events.map((e) => ({ type: e.type, payload: e.payload, created_at: e.created_at }) as NewEvent);
