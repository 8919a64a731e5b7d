import { resolve } from 'node:path';
import { Module, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { Database, isPostgresUrl } from '@runledger/event-store';
import { RuntimeLogger } from '@runledger/runtime';
import {
  ArchiveRunner,
  RetentionSweeper,
  STORAGE_DB,
  ThreadArchiver,
  parseRetention,
  postgresArchiver,
} from '@runledger/state-store';
import { Kysely } from 'kysely';
import { APP_CONFIG, AppConfig } from '../config';
import { COMPANION_STREAM_PREFIXES, RECEIPT_STREAM_PREFIXES, companionStreams } from './companion-streams';

/**
 * The server's retention sweeper, when a policy is set and RUNLEDGER_RETENTION_SWEEP_MS is not 0.
 * SQLite: an archiver in a worker thread, on a connection of its own (its batch transactions must
 * not share the store's connection, and its work must not hold the event loop); PostgreSQL: the
 * storage's pool. Starts once every module is up, stops (after
 * the batch in flight) before the storage closes.
 */
export class RetentionHost implements OnApplicationBootstrap, OnModuleDestroy {
  private sweeper: RetentionSweeper | null = null;
  private thread: ThreadArchiver | null = null;

  constructor(
    private readonly config: AppConfig,
    private readonly db: Kysely<Database>,
    private readonly log: RuntimeLogger,
  ) {}

  /** The running sweeper; null when the server does not sweep. */
  get running(): RetentionSweeper | null {
    return this.sweeper;
  }

  onApplicationBootstrap(): void {
    const c = this.config;
    const policy = parseRetention(c.RUNLEDGER_RETENTION, c.RUNLEDGER_RETENTION_CATALOG_AFTER);
    if (!policy || c.RUNLEDGER_RETENTION_SWEEP_MS === 0 || c.RUNLEDGER_DB === ':memory:') return;
    const options = {
      batchTasks: c.RUNLEDGER_RETENTION_SWEEP_BATCH,
      companionStreams,
      receiptStreamPrefixes: RECEIPT_STREAM_PREFIXES,
    };
    let archiver: ArchiveRunner;
    if (isPostgresUrl(c.RUNLEDGER_DB)) archiver = postgresArchiver(this.db, options);
    else {
      // planning, gzip, fsync and the batch transactions off the event loop
      const thread = new ThreadArchiver({
        path: resolve(c.RUNLEDGER_DB),
        batchTasks: options.batchTasks,
        companionPrefixes: COMPANION_STREAM_PREFIXES,
        receiptPrefixes: RECEIPT_STREAM_PREFIXES,
      });
      this.thread = thread;
      archiver = thread;
    }
    this.sweeper = new RetentionSweeper(archiver, {
      policy,
      intervalMs: c.RUNLEDGER_RETENTION_SWEEP_MS,
      restMs: c.RUNLEDGER_RETENTION_REST_MS,
      log: this.log,
    });
    this.sweeper.start();
  }

  async onModuleDestroy(): Promise<void> {
    await this.sweeper?.stop();
    await this.thread?.close();
    this.sweeper = null;
    this.thread = null;
  }
}

@Module({
  providers: [
    {
      provide: RetentionHost,
      useFactory: (c: AppConfig, db: Kysely<Database>, log: RuntimeLogger) => new RetentionHost(c, db, log),
      inject: [APP_CONFIG, STORAGE_DB, RuntimeLogger],
    },
  ],
  exports: [RetentionHost],
})
export class RetentionModule {}
