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

// the server's composition: the lease writes go to the writer thread's connection with the appends they fence
runLeaseStoreConformance('SqlLeaseStore on SQLite with the writer thread', async () => {
  const temp = await createTempStorage({ writerThread: true });
  return {
    leases: new SqlLeaseStore(temp.storage.db, SQLITE_NOW_MS),
    events: temp.storage.eventStore,
    dispose: temp.dispose,
  };
});
