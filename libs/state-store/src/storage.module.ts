import { DynamicModule, InjectionToken, Module, OnApplicationShutdown, Provider } from '@nestjs/common';
import { ModuleAsyncOptions, forRootAsyncModule } from '@runledger/contracts';
import { EventBus, EventStore, SqliteSynchronous } from '@runledger/event-store';
import { Kysely } from 'kysely';
import { CheckpointStore } from './checkpoint-store';
import { LeaseStore } from './lease-store';
import { ProcessRegistry } from './process-registry';
import { Erasure } from './erasure/erasure';
import { Storage, createPostgresStorage, createSqliteStorage } from './storage';
import { TaskStateStore } from './task-state-store';

/**
 * Which storage adapter backs the ports: SQLite (one process; path `:memory:`
 * gives tests a private in-memory database) or PostgreSQL (several instances
 * on one database).
 */
export type StorageOptions =
  | {
      driver: 'sqlite';
      path: string;
      synchronous?: SqliteSynchronous;
      /** appends in a worker thread, always or while concurrent (see createSqliteStorage); default false */
      writerThread?: boolean | 'while_concurrent';
      /** seal the personal fields of new events under their session's data key (erasure) */
      sealPayloads?: boolean;
      /** the key-encryption key the data keys in `<db>.keys` are wrapped with */
      keyEncryptionKey?: Buffer;
    }
  | { driver: 'postgres'; url: string; schema?: string; maxConnections?: number; sealPayloads?: boolean };

/** The kysely handle of the storage database, for libs that keep their own tables in it (memory). */
export const STORAGE_DB = Symbol('STORAGE_DB');
/** The same database, for those libs' writes that may ride in the next commit (SqliteHandle.lazyDb). */
export const STORAGE_LAZY_DB = Symbol('STORAGE_LAZY_DB');

const STORAGE_OPTIONS = Symbol('STORAGE_OPTIONS');

/** The one place an adapter is chosen: open, migrate and wire the storage for its driver. */
export function openStorage(options: StorageOptions): Promise<Storage> {
  switch (options.driver) {
    case 'sqlite':
      return createSqliteStorage({
        path: options.path,
        synchronous: options.synchronous,
        writerThread: options.writerThread,
        sealPayloads: options.sealPayloads,
        keyEncryptionKey: options.keyEncryptionKey,
      });
    case 'postgres':
      return createPostgresStorage({
        url: options.url,
        schema: options.schema,
        maxConnections: options.maxConnections,
        sealPayloads: options.sealPayloads,
      });
  }
}

/** Holds the opened storage; closes it last, once everything that writes to it has stopped. */
export class OpenedStorage implements OnApplicationShutdown {
  constructor(readonly storage: Storage) {}

  async onApplicationShutdown(): Promise<void> {
    await this.storage.close();
  }
}

const fromStorage = (token: InjectionToken, pick: (s: Storage) => unknown): Provider => ({
  provide: token,
  useFactory: (opened: OpenedStorage) => pick(opened.storage),
  inject: [OpenedStorage],
});

/**
 * The storage ports under their abstract-class tokens: EventStore, EventBus,
 * TaskStateStore, CheckpointStore, LeaseStore, ProcessRegistry, and the kysely handle
 * (STORAGE_DB, STORAGE_LAZY_DB). Global: every lib module injects them.
 */
@Module({})
export class StorageModule {
  static forRootAsync(options: ModuleAsyncOptions<StorageOptions>): DynamicModule {
    const exported = [
      EventStore,
      EventBus,
      TaskStateStore,
      CheckpointStore,
      LeaseStore,
      ProcessRegistry,
      Erasure,
      STORAGE_DB,
      STORAGE_LAZY_DB,
    ];
    return forRootAsyncModule(StorageModule, options, {
      provide: STORAGE_OPTIONS,
      providers: [
        {
          provide: OpenedStorage,
          useFactory: async (o: StorageOptions) => new OpenedStorage(await openStorage(o)),
          inject: [STORAGE_OPTIONS],
        },
        fromStorage(EventStore, (s) => s.eventStore),
        fromStorage(EventBus, (s) => s.bus),
        fromStorage(TaskStateStore, (s) => s.taskStates),
        fromStorage(CheckpointStore, (s) => s.checkpoints),
        fromStorage(LeaseStore, (s) => s.leases),
        fromStorage(ProcessRegistry, (s) => s.processes),
        fromStorage(Erasure, (s) => s.erasure),
        fromStorage(STORAGE_DB, (s): Kysely<unknown> => s.db as Kysely<unknown>),
        fromStorage(STORAGE_LAZY_DB, (s): Kysely<unknown> => s.lazyDb as Kysely<unknown>),
      ],
      exports: exported,
    });
  }
}
