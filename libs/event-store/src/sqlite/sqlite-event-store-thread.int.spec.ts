import { runEventStoreConformance } from '../testing/conformance';
import { createTempSqlite, sqliteLeaseSetter } from '../testing/sqlite';
import { SqliteEventStore } from './sqlite-event-store';

runEventStoreConformance('SqliteEventStore, writer thread', async () => {
  const db = await createTempSqlite();
  return {
    store: new SqliteEventStore(db.handle, { writerThread: {} }),
    setLease: sqliteLeaseSetter(db.handle),
    dispose: db.dispose,
  };
});
