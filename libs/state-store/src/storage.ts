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
import { TASK_STATES_PROJECTION, TaskStateStore } from './task-state-store';

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

export interface SqliteStorageOptions extends OpenSqliteOptions {
  /**
   * Appends (with the task-state projection) on a connection of their own in a
   * worker thread, so their fsyncs never block the event loop; reads and the
   * other tables' writes stay on this thread's connection. Default false here;
   * the server and the CLI turn it on (RUNLEDGER_SQLITE_WRITER_THREAD).
   */
  writerThread?: boolean;
}

/**
 * Open (creating the file and folder), migrate, and wire the storage layer:
 * the event store with the task-state projection inline, and the bus fed by
 * its commits. `close()` completes the bus and closes the connection.
 */
export async function createSqliteStorage(options: SqliteStorageOptions): Promise<SqliteStorage> {
  const handle = openSqlite(options);
  try {
    await migrateToLatest(handle.db);
  } catch (err) {
    await handle.close();
    throw err;
  }
  const taskStates = new TaskStateStore(handle);
  const eventStore = new SqliteEventStore(
    handle,
    options.writerThread
      ? { writerThread: { projections: [TASK_STATES_PROJECTION] } }
      : { projections: [taskStates] },
  );
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
      await eventStore.close();
      bus.close();
      await handle.close();
    },
  };
}
