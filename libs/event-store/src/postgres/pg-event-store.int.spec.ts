import { describePostgres, useTestPostgres } from '@runledger/testing';
import { runEventStoreConformance } from '../testing/conformance';
import { PgEventStore } from './pg-event-store';

describePostgres('PgEventStore', () => {
  const pg = useTestPostgres();
  runEventStoreConformance('PgEventStore', async () => {
    const db = await pg.freshSchema();
    return {
      store: new PgEventStore(db.handle),
      setLease: async (taskId, lease) =>
        void (await db.handle.pool.query(
          `INSERT INTO task_leases (task_id, owner, epoch, expires_at) VALUES ($1, $2, $3, 0)
           ON CONFLICT (task_id) DO UPDATE SET owner = excluded.owner, epoch = excluded.epoch`,
          [taskId, lease.owner, lease.epoch],
        )),
      dispose: db.dispose,
    };
  });
});
