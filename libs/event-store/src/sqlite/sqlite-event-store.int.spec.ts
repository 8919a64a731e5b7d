import { runEventStoreConformance } from '../testing/conformance';
import { createTempSqlite, sqliteLeaseSetter } from '../testing/sqlite';
import { SqliteEventStore } from './sqlite-event-store';

runEventStoreConformance('SqliteEventStore', async () => {
  const db = await createTempSqlite();
  return {
    store: new SqliteEventStore(db.handle),
    setLease: sqliteLeaseSetter(db.handle),
    dispose: db.dispose,
  };
});
