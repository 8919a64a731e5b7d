import {
  Database,
  EventBus,
  EventStore,
  GroupCommitOptions,
  OpenPostgresOptions,
  OpenSqliteOptions,
  PgEventStore,
  PostgresHandle,
  SqliteEventStore,
  SqliteHandle,
  createSchemaIfMissing,
  openPostgres,
  openSqlite,
} from '@runledger/event-store';
import { migrateToLatest } from '@runledger/migrations';
import { Kysely } from 'kysely';
import { CheckpointStore } from './checkpoint-store';
import { Erasure, pgKeyDestroyer, sqliteKeyDestroyer } from './erasure/erasure';
import { PgTaskStateStore } from './postgres/pg-task-state-store';
import { LeaseStore } from './lease-store';
import { ProcessRegistry } from './process-registry';
import { POSTGRES_NOW_MS, SQLITE_NOW_MS, SqlLeaseStore } from './sql-lease-store';
import { SqliteTaskStateStore, TASK_STATES_PROJECTION, TaskStateStore } from './task-state-store';

/** The storage ports over one database, whatever the driver. */
export interface Storage {
  driver: 'sqlite' | 'postgres';
  db: Kysely<Database>;
  /** the same database, for writes that may ride in the next commit (SqliteHandle.lazyDb) */
  lazyDb: Kysely<Database>;
  eventStore: EventStore;
  bus: EventBus;
  taskStates: TaskStateStore;
  checkpoints: CheckpointStore;
  /** who runs which task; the event store fences leased appends against the same table */
  leases: LeaseStore;
  /** runledger processes with this database open; this one is registered until close() */
  processes: ProcessRegistry;
  /** forgets a session by destroying its data key (crypto-shredding) */
  erasure: Erasure;
  /** completes the bus and closes the connection(s) */
  close(): Promise<void>;
}

export interface SqliteStorage extends Storage, SqliteHandle {
  driver: 'sqlite';
  eventStore: SqliteEventStore;
}

export interface PostgresStorage extends Storage, PostgresHandle {
  driver: 'postgres';
  eventStore: PgEventStore;
  taskStates: PgTaskStateStore;
}

/** Migrate a freshly opened handle; a failure closes it before rethrowing. */
async function migrated<H extends { db: Kysely<Database>; close(): Promise<void> }>(
  handle: H,
  prepare: () => Promise<void> = async () => undefined,
): Promise<H> {
  try {
    await prepare();
    await migrateToLatest(handle.db);
    return handle;
  } catch (err) {
    await handle.close();
    throw err;
  }
}

/** What every driver wires the same way over its event store and task states. */
async function wire(
  handle: { db: Kysely<Database>; lazyDb: Kysely<Database>; close(): Promise<void> },
  eventStore: EventStore,
  taskStates: TaskStateStore,
  database: string,
) {
  const bus = new EventBus(eventStore);
  const checkpoints = new CheckpointStore(handle, eventStore, taskStates);
  const processes = new ProcessRegistry(handle, database);
  await processes.register();
  return {
    bus,
    checkpoints,
    processes,
    async close() {
      await processes.unregister().catch(() => undefined);
      // the writer thread (when there is one) commits what it holds before the bus completes
      await eventStore.close();
      bus.close();
      await taskStates.close();
      await handle.close();
    },
  };
}

export interface SqliteStorageOptions extends OpenSqliteOptions {
  /**
   * true: appends (with the task-state projection) and the connection's other
   * writes commit on a connection of their own in a worker thread, so their
   * fsyncs never block the event loop; reads stay on this thread's connection.
   * `while_concurrent`: the same while appends of more than one task come
   * together, a lone appender commits on this thread's connection
   * (AdaptiveAppendWriter). Default false here; the server and the CLI choose
   * (RUNLEDGER_SQLITE_WRITER_THREAD).
   */
  writerThread?: boolean | 'while_concurrent';
  /** how appends are grouped into transactions (SqliteEventStore's groupCommit) */
  groupCommit?: GroupCommitOptions;
  /** seal the personal fields of new events under their session's data key (SqliteEventStore's sealPayloads) */
  sealPayloads?: boolean;
  /** the key-encryption key the data keys are wrapped with (SqliteEventStore's keyEncryptionKey) */
  keyEncryptionKey?: Buffer;
}

/**
 * Open (creating the file and folder), migrate, and wire the storage layer:
 * the event store with the task-state projection inline, and the bus fed by
 * its commits. `close()` completes the bus and closes the connection.
 */
export async function createSqliteStorage(options: SqliteStorageOptions): Promise<SqliteStorage> {
  const handle = await migrated(openSqlite(options));
  const taskStates: SqliteTaskStateStore = new SqliteTaskStateStore(handle, {
    openCopies: (texts) => eventStore.openCopies(texts),
    sealCopies: options.sealPayloads,
  });
  const eventStore = new SqliteEventStore(handle, {
    ...(options.writerThread
      ? {
          writerThread: {
            projections: [TASK_STATES_PROJECTION],
            whileAlone: options.writerThread === 'while_concurrent' ? 'inline' : 'thread',
          },
        }
      : { projections: [taskStates] }),
    groupCommit: options.groupCommit,
    sealPayloads: options.sealPayloads,
    keyEncryptionKey: options.keyEncryptionKey,
  });
  const wired = await wire(handle, eventStore, taskStates, handle.raw.name);
  const leases = new SqlLeaseStore(handle.db, SQLITE_NOW_MS);
  const erasure = new Erasure(handle.db, eventStore, sqliteKeyDestroyer(eventStore, handle), taskStates);
  return { ...handle, driver: 'sqlite', eventStore, taskStates, leases, erasure, ...wired };
}

/**
 * The same on PostgreSQL: open a pool, create the schema if missing, migrate,
 * and wire the PgEventStore with the task-state projection inline. Several
 * instances may do this on one database at once (the migrator locks).
 */
export async function createPostgresStorage(
  options: OpenPostgresOptions & { sealPayloads?: boolean },
): Promise<PostgresStorage> {
  const handle = openPostgres(options);
  await migrated(handle, () => createSchemaIfMissing(handle));
  const taskStates: PgTaskStateStore = new PgTaskStateStore(handle, {
    openCopies: (texts) => eventStore.openCopies(texts),
    sealCopies: options.sealPayloads,
  });
  const eventStore = new PgEventStore(handle, {
    projections: [taskStates],
    sealPayloads: options.sealPayloads,
  });
  const database = `${redactPassword(options.url)}#${handle.schema}`;
  const wired = await wire(handle, eventStore, taskStates, database);
  const leases = new SqlLeaseStore(handle.db, POSTGRES_NOW_MS);
  const erasure = new Erasure(handle.db, eventStore, pgKeyDestroyer(handle), taskStates);
  return { ...handle, driver: 'postgres', eventStore, taskStates, leases, erasure, ...wired };
}

const redactPassword = (url: string): string => {
  const u = new URL(url);
  u.password = '';
  return u.toString();
};
