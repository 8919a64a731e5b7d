import { LeaseToken } from './event-store';
import { InMemoryEventStore } from './in-memory-event-store';
import { runEventStoreConformance } from './testing/conformance';

runEventStoreConformance('InMemoryEventStore', async () => {
  const leases = new Map<string, LeaseToken>();
  return {
    store: new InMemoryEventStore({ current: (taskId) => leases.get(taskId) ?? null }),
    setLease: async (taskId, lease) => void leases.set(taskId, lease),
  };
});
