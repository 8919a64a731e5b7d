import {
  EventBus,
  OpenSqliteOptions,
  SqliteEventStore,
  SqliteHandle,
  openSqlite,
} from '@runledger/event-store';
import { migrateToLatest } from '@runledger/migrations';
import { CheckpointStore } from './checkpoint-store';
import { LeaseStore } from './lease-store';
import { ProcessRegistry } from './process-registry';
import { SQLITE_NOW_MS, SqlLeaseStore } from './sql-lease-store';
import { TaskStateStore } from './task-state-store';

export interface SqliteStorage extends SqliteHandle {
  eventStore: SqliteEventStore;
  bus: EventBus;
  taskStates: TaskStateStore;
  checkpoints: CheckpointStore;
  /** who runs which task; the event store fences leased appends against the same table */
  leases: LeaseStore;
  /** runledger processes with this database open; this one is registered until close() */
  processes: ProcessRegistry;
}

/**
 * Open (creating the file and folder), migrate, and wire the storage layer:
 * the event store with the task-state projection inline, and the bus fed by
 * its commits. `close()` completes the bus and closes the connection.
 */
export async function createSqliteStorage(options: OpenSqliteOptions): Promise<SqliteStorage> {
  const handle = openSqlite(options);
  try {
    await migrateToLatest(handle.db);
  } catch (err) {
    await handle.close();
    throw err;
  }
  const taskStates = new TaskStateStore(handle);
  const eventStore = new SqliteEventStore(handle, { projections: [taskStates] });
  const bus = new EventBus(eventStore);
  const checkpoints = new CheckpointStore(handle, eventStore, taskStates);
  const processes = new ProcessRegistry(handle);
  await processes.register();
  return {
    ...handle,
    eventStore,
    bus,
    taskStates,
    checkpoints,
    leases: new SqlLeaseStore(handle.db, SQLITE_NOW_MS),
    processes,
    async close() {
      await processes.unregister().catch(() => undefined);
      bus.close();
      await handle.close();
    },
  };
}
