import { runEventStoreConformance } from '../testing/conformance';
import { createTempSqlite } from '../testing/sqlite';
import { SqliteEventStore } from './sqlite-event-store';

runEventStoreConformance('SqliteEventStore, writer thread', async () => {
  const db = await createTempSqlite();
  return { store: new SqliteEventStore(db.handle, { writerThread: {} }), dispose: db.dispose };
});
