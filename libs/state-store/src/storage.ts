import {
  EventBus,
  OpenSqliteOptions,
  SqliteEventStore,
  SqliteHandle,
  openSqlite,
} from '@runledger/event-store';
import { migrateToLatest } from '@runledger/migrations';
import { CheckpointStore } from './checkpoint-store';
import { TaskStateStore } from './task-state-store';

export interface SqliteStorage extends SqliteHandle {
  eventStore: SqliteEventStore;
  bus: EventBus;
  taskStates: TaskStateStore;
  checkpoints: CheckpointStore;
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
  return {
    ...handle,
    eventStore,
    bus,
    taskStates,
    checkpoints,
    async close() {
      bus.close();
      await handle.close();
    },
  };
}
