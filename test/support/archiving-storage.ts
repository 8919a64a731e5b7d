import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  Archiver,
  Storage,
  createPostgresStorage,
  createSqliteStorage,
  openSqliteArchiver,
  postgresArchiver,
} from '@runledger/state-store';
import { describePostgres, useTestPostgres } from './postgres';

/** A storage on a fresh database, and an archiver on it (a connection of its own on SQLite, as the server's). */
export interface ArchivingStorage {
  storage: Storage;
  /** a temp folder of the test's own (SQLite: the database's), removed by dispose */
  dir: string;
  archive<T>(body: (archiver: Archiver) => Promise<T>): Promise<T>;
  dispose(): Promise<void>;
}

async function sqliteArchivingStorage(): Promise<ArchivingStorage> {
  const dir = mkdtempSync(join(tmpdir(), 'runledger-archiving-'));
  const path = join(dir, 'runledger.db');
  const storage = await createSqliteStorage({ path, synchronous: 'NORMAL' });
  return {
    storage,
    dir,
    async archive(body) {
      const access = openSqliteArchiver(path);
      try {
        return await body(access.archiver);
      } finally {
        await access.close();
      }
    },
    async dispose() {
      await storage.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Runs `body` on SQLite and on PostgreSQL (see describePostgres), each test opening a fresh
 * ArchivingStorage (on PostgreSQL in an already migrated schema, as createTempPgStorage).
 */
export function describeArchivingStorages(
  name: string,
  body: (open: () => Promise<ArchivingStorage>) => void,
): void {
  describe(`${name} on SQLite`, () => body(sqliteArchivingStorage));
  describePostgres(`${name} on PostgreSQL`, () => {
    const pg = useTestPostgres();
    body(async () => {
      const schema = await pg.freshSchema();
      await schema.handle.close();
      const storage = await createPostgresStorage({
        url: schema.url,
        schema: schema.schema,
        maxConnections: 5,
      });
      const dir = mkdtempSync(join(tmpdir(), 'runledger-archiving-'));
      return {
        storage,
        dir,
        archive: (run) => run(postgresArchiver(storage.db)),
        async dispose() {
          await storage.close();
          await schema.dispose();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    });
  });
}
