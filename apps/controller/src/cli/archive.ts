import { resolve } from 'node:path';
import { ValidationError } from '@runledger/contracts';
import { isPostgresUrl, openPostgres } from '@runledger/event-store';
import {
  ArchiveRun,
  Archiver,
  RestoreResult,
  VacuumResult,
  openSqliteArchiver,
  parseCatalogAfter,
  parseDuration,
  parseRetention,
  postgresArchiver,
} from '@runledger/state-store';
import { AppConfig } from '../config';
import { RECEIPT_STREAM_PREFIXES, companionStreams } from '../retention/companion-streams';

/**
 * The archiver on RUNLEDGER_DB, for one command: a connection of its own on SQLite (the server may
 * be writing the file), a small pool on PostgreSQL. Closed when `body` is done.
 */
export async function withArchiver<T>(
  config: AppConfig,
  cwd: string,
  body: (archiver: Archiver) => Promise<T>,
): Promise<T> {
  const options = {
    batchTasks: config.RUNLEDGER_RETENTION_BATCH,
    companionStreams,
    receiptStreamPrefixes: RECEIPT_STREAM_PREFIXES,
  };
  if (isPostgresUrl(config.RUNLEDGER_DB)) {
    const handle = openPostgres({
      url: config.RUNLEDGER_DB,
      schema: config.RUNLEDGER_PG_SCHEMA,
      maxConnections: 2,
    });
    try {
      return await body(postgresArchiver(handle.db, options));
    } finally {
      await handle.close();
    }
  }
  let access;
  try {
    access = openSqliteArchiver(resolve(cwd, config.RUNLEDGER_DB), options);
  } catch (err) {
    throw new ValidationError(
      `no database at ${resolve(cwd, config.RUNLEDGER_DB)} (${(err as Error).message})`,
    );
  }
  try {
    return await body(access.archiver);
  } finally {
    await access.close();
  }
}

/** `runledger archive`: the policy (or the age given) applied now, batch after batch. */
export async function archiveNow(
  config: AppConfig,
  cwd: string,
  flags: { older_than: string | null; dry_run: boolean },
  now = Date.now(),
): Promise<ArchiveRun> {
  const catalogAfter = parseCatalogAfter(config.RUNLEDGER_RETENTION_CATALOG_AFTER);
  const policy = flags.older_than
    ? {
        rules: [{ older_than_ms: parseDuration(flags.older_than, '--older-than') }],
        ...(catalogAfter === undefined ? {} : { catalog_after_ms: catalogAfter }),
      }
    : parseRetention(config.RUNLEDGER_RETENTION, config.RUNLEDGER_RETENTION_CATALOG_AFTER);
  if (!policy)
    throw new ValidationError(
      'archive: RUNLEDGER_RETENTION is off; give --older-than DURATION (e.g. 30d) or set a policy',
    );
  return withArchiver(config, cwd, (a) =>
    a.run(policy, now, { dryRun: flags.dry_run, reason: flags.older_than ? 'older_than' : 'policy' }),
  );
}

export const restoreArchived = (config: AppConfig, cwd: string, id: string): Promise<RestoreResult> =>
  withArchiver(config, cwd, (a) => a.restore(id));

export const vacuumDatabase = (config: AppConfig, cwd: string): Promise<VacuumResult> =>
  withArchiver(config, cwd, (a) => a.vacuum());
