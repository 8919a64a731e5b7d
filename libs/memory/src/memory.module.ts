import { BeforeApplicationShutdown, DynamicModule, Module } from '@nestjs/common';
import { ModuleAsyncOptions, forRootAsyncModule } from '@runledger/contracts';
import { EventStore } from '@runledger/event-store';
import { STORAGE_DB, STORAGE_LAZY_DB } from '@runledger/state-store';
import { Kysely } from 'kysely';
import { Embedder, HashingEmbedder, OpenAIEmbedder, OpenAIEmbedderOptions } from './embedder';
import { MemoryPolicy } from './memory-policy';
import { MemoryService } from './memory-service';
import { MemoryDatabase, MemoryStore } from './memory-store';
import { MemoryPolicyConfig } from './memory-write-policy';

export type EmbedderOptions = { kind: 'hash'; dim: number } | ({ kind: 'openai' } & OpenAIEmbedderOptions);

/** Off (RUNLEDGER_MEMORY=off): no Embedder and no MemoryService; the policy still decides for the critic hook. */
export type MemoryOptions =
  | { enabled: false; policy: MemoryPolicyConfig }
  | {
      enabled: true;
      embedder: EmbedderOptions;
      /** the HNSW file; null keeps the index in memory only */
      indexPath: string | null;
      /** a missing or stale index file is rebuilt in a worker thread (searches scan exactly meanwhile) */
      rebuildIndexInBackground?: boolean;
      policy: MemoryPolicyConfig;
      /** see MemoryServiceOptions.deduplicateWithinSession */
      deduplicateWithinSession?: boolean;
      log?: (message: string, err?: unknown) => void;
    };

const MEMORY_OPTIONS = Symbol('MEMORY_OPTIONS');

export function embedderFrom(options: EmbedderOptions): Embedder {
  return options.kind === 'hash' ? new HashingEmbedder(options.dim) : new OpenAIEmbedder(options);
}

/** Saves the memory index after the runtime stopped writing and before the storage closes. */
class MemoryShutdown implements BeforeApplicationShutdown {
  constructor(private readonly service: MemoryService | null) {}

  async beforeApplicationShutdown(): Promise<void> {
    await this.service?.close();
  }
}

/**
 * MemoryStore (its tables in the storage database), Embedder, MemoryPolicy and
 * MemoryService (which keeps the VectorIndex in step with MEMORY_WRITTEN events)
 * under their class tokens. Embedder and MemoryService are null when memory is off.
 */
@Module({})
export class MemoryModule {
  static forRootAsync(options: ModuleAsyncOptions<MemoryOptions>): DynamicModule {
    return forRootAsyncModule(MemoryModule, options, {
      provide: MEMORY_OPTIONS,
      providers: [
        {
          provide: Embedder,
          useFactory: (o: MemoryOptions) => (o.enabled ? embedderFrom(o.embedder) : null),
          inject: [MEMORY_OPTIONS],
        },
        {
          provide: MemoryStore,
          useFactory: (db: Kysely<unknown>, lazyDb: Kysely<unknown>, events: EventStore) =>
            new MemoryStore(db as Kysely<MemoryDatabase>, lazyDb as Kysely<MemoryDatabase>, events),
          inject: [STORAGE_DB, STORAGE_LAZY_DB, EventStore],
        },
        {
          provide: MemoryPolicy,
          useFactory: (o: MemoryOptions) => new MemoryPolicy(o.policy),
          inject: [MEMORY_OPTIONS],
        },
        {
          provide: MemoryService,
          useFactory: (o: MemoryOptions, store: MemoryStore, events: EventStore, embedder: Embedder) =>
            o.enabled
              ? MemoryService.open({
                  store,
                  events,
                  embedder,
                  indexPath: o.indexPath,
                  rebuildInBackground: o.rebuildIndexInBackground,
                  deduplicateWithinSession: o.deduplicateWithinSession,
                  log: o.log,
                })
              : null,
          inject: [MEMORY_OPTIONS, MemoryStore, EventStore, Embedder],
        },
        {
          provide: MemoryShutdown,
          useFactory: (service: MemoryService | null) => new MemoryShutdown(service),
          inject: [MemoryService],
        },
      ],
      exports: [Embedder, MemoryStore, MemoryPolicy, MemoryService],
    });
  }
}
