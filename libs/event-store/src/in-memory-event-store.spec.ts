import { InMemoryEventStore } from './in-memory-event-store';
import { runEventStoreConformance } from './testing/conformance';

runEventStoreConformance('InMemoryEventStore', async () => ({ store: new InMemoryEventStore() }));
