import { SqlLeaseStore, SQLITE_NOW_MS } from './sql-lease-store';
import { createTempStorage } from './testing/temp-storage';
import { runLeaseStoreConformance } from './testing/lease-store-conformance';

runLeaseStoreConformance('SqlLeaseStore on SQLite', async () => {
  const temp = await createTempStorage();
  return {
    leases: new SqlLeaseStore(temp.storage.db, SQLITE_NOW_MS),
    events: temp.storage.eventStore,
    dispose: temp.dispose,
  };
});
