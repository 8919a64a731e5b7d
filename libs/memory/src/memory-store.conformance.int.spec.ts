import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kysely } from 'kysely';
import { openSqlite } from '@runledger/event-store';
import { migrateToLatest } from '@runledger/migrations';
import { describePostgres, useTestPostgres } from '@runledger/testing';
import { MemoryDatabase, MemoryStore } from './memory-store';
import { runMemoryStoreConformance } from './testing/memory-store-conformance';

runMemoryStoreConformance('SQLite file', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'rl-memory-store-'));
  const handle = openSqlite({ path: join(dir, 'runledger.db') });
  await migrateToLatest(handle.db);
  return {
    sut: new MemoryStore(handle.db as unknown as Kysely<MemoryDatabase>),
    close: async () => {
      await handle.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

describePostgres('MemoryStore on PostgreSQL', () => {
  const pg = useTestPostgres();
  runMemoryStoreConformance('PostgreSQL schema', async () => {
    const db = await pg.freshSchema();
    return {
      sut: new MemoryStore(db.handle.db as unknown as Kysely<MemoryDatabase>),
      close: () => db.dispose(),
    };
  });
});
