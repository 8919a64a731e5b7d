import { runEventStoreConformance } from '../testing/conformance';
import { describePostgres, useTestPostgres } from '@runledger/testing';
import { PgEventStore } from './pg-event-store';

describePostgres('PgEventStore', () => {
  const pg = useTestPostgres();
  runEventStoreConformance('PgEventStore', async () => {
    const db = await pg.freshSchema();
    return { store: new PgEventStore(db.handle), dispose: db.dispose };
  });
});
