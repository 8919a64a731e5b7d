import { InMemoryEventStore } from '@runledger/event-store';
import { InMemoryLeaseStore } from './in-memory-lease-store';
import { runLeaseStoreConformance } from './testing/lease-store-conformance';

runLeaseStoreConformance('InMemoryLeaseStore', async () => {
  const leases = new InMemoryLeaseStore();
  return { leases, events: new InMemoryEventStore(leases) };
});
