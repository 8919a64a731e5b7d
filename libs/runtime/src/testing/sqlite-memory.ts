import { join } from 'node:path';
import { Kysely } from 'kysely';
import { SqliteEventStore, SqliteHandle, openSqlite } from '@runledger/event-store';
import { HashingEmbedder, MemoryDatabase, MemoryService, MemoryStore } from '@runledger/memory';
import { migrateToLatest } from '@runledger/migrations';

/** A migrated SQLite event log and a memory over the same file, both in `dir`, as the controller opens them. */
export interface SqliteWithMemory {
  handle: SqliteHandle;
  store: SqliteEventStore;
  memory: MemoryService;
  /** closes the memory, then the database; the files stay in `dir` */
  close(): Promise<void>;
}

/** Opens (or reopens) the log `dir`/runledger.db and the memory beside it, for the runtime's int specs. */
export async function openSqliteWithMemory(dir: string): Promise<SqliteWithMemory> {
  const handle = openSqlite({ path: join(dir, 'runledger.db') });
  await migrateToLatest(handle.db);
  const store = new SqliteEventStore(handle);
  const memory = await MemoryService.open({
    store: new MemoryStore(
      handle.db as unknown as Kysely<MemoryDatabase>,
      handle.lazyDb as unknown as Kysely<MemoryDatabase>,
      store,
    ),
    events: store,
    embedder: new HashingEmbedder(),
    indexPath: join(dir, 'memory.hnsw'),
  });
  return {
    handle,
    store,
    memory,
    close: async () => {
      await memory.close();
      await handle.close();
    },
  };
}
