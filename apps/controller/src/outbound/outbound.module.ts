import { join } from 'node:path';
import { Module, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { EventBus, EventStore } from '@runledger/event-store';
import { RuntimeLogger, TaskTree } from '@runledger/runtime';
import { ToolSandbox } from '@runledger/tools';
import { WrittenFileArtifacts, readWritten } from '../a2a/written-file-artifacts';
import { APP_CONFIG, AppConfig, dataDirOf } from '../config';
import { readOrCreateRandomFile } from '../random-file';
import { OutboundDeliveries } from './outbound-deliveries';
import { TaskCallbacks } from './task-callbacks';

/** Where the generated signing key lives when RUNLEDGER_OUTBOUND_SIGNING_KEY is not set: beside admin.token. */
export const outboundKeyFile = (dataDir: string): string => join(dataDir, 'outbound-signing.key');

export function outboundSigningKey(c: AppConfig): Buffer {
  return Buffer.from(
    c.RUNLEDGER_OUTBOUND_SIGNING_KEY ?? readOrCreateRandomFile(outboundKeyFile(dataDirOf(c)), 32).value,
  );
}

/** Starts delivering once every module is up (pending deliveries of the log resume), stops before the storage closes. */
class OutboundLifecycle implements OnApplicationBootstrap, OnModuleDestroy {
  constructor(private readonly deliveries: OutboundDeliveries) {}

  onApplicationBootstrap(): Promise<void> {
    return this.deliveries.start();
  }

  onModuleDestroy(): Promise<void> {
    return this.deliveries.stop();
  }
}

/** The one outbound-delivery component: A2A push notifications and task callbacks both go through it. */
@Module({
  providers: [
    {
      provide: OutboundDeliveries,
      useFactory: (
        c: AppConfig,
        store: EventStore,
        bus: EventBus,
        logger: RuntimeLogger,
        tree: TaskTree,
        sandbox: ToolSandbox,
      ) => {
        const files = new WrittenFileArtifacts(store, tree, (path) => readWritten(sandbox, path));
        return new OutboundDeliveries(store, bus, {
          signingKey: outboundSigningKey(c),
          retry: {
            maxAttempts: c.RUNLEDGER_OUTBOUND_MAX_ATTEMPTS,
            baseDelayMs: c.RUNLEDGER_OUTBOUND_BACKOFF_MS,
            maxDelayMs: c.RUNLEDGER_OUTBOUND_BACKOFF_MAX_MS,
          },
          claimMs: c.RUNLEDGER_OUTBOUND_TIMEOUT_MS * 3,
          requestTimeoutMs: c.RUNLEDGER_OUTBOUND_TIMEOUT_MS,
          sweepMs: 5_000,
          filesOf: (taskId) => files.of(taskId),
          logger,
        });
      },
      inject: [APP_CONFIG, EventStore, EventBus, RuntimeLogger, TaskTree, ToolSandbox],
    },
    {
      provide: TaskCallbacks,
      useFactory: (d: OutboundDeliveries) => new TaskCallbacks(d),
      inject: [OutboundDeliveries],
    },
    {
      provide: OutboundLifecycle,
      useFactory: (d: OutboundDeliveries) => new OutboundLifecycle(d),
      inject: [OutboundDeliveries],
    },
  ],
  exports: [OutboundDeliveries, TaskCallbacks],
})
export class OutboundModule {}
