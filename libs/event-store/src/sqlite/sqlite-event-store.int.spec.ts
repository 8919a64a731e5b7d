import { runEventStoreConformance } from '../testing/conformance';
import { createTempSqlite } from '../testing/sqlite';
import { SqliteEventStore } from './sqlite-event-store';

runEventStoreConformance('SqliteEventStore', async () => {
  const db = await createTempSqlite();
  const upsertLease = db.handle.raw.prepare<[string, string, number]>(
    `INSERT INTO task_leases (task_id, owner, epoch, expires_at) VALUES (?, ?, ?, 0)
     ON CONFLICT (task_id) DO UPDATE SET owner = excluded.owner, epoch = excluded.epoch`,
  );
  return {
    store: new SqliteEventStore(db.handle),
    setLease: async (taskId, lease) => void upsertLease.run(taskId, lease.owner, lease.epoch),
    dispose: db.dispose,
  };
});
