import Database from 'better-sqlite3';
import { resolve } from 'node:path';
import { OnApplicationShutdown } from '@nestjs/common';
import { MIGRATIONS } from '@runledger/migrations';
import { Kysely, sql } from 'kysely';

export interface HealthReport {
  db: 'reachable' | 'unreachable';
  migrations: 'current' | 'pending' | 'unknown';
  sandbox: string | null;
}

/** What /health reports about the database and the sandbox; one per storage driver. */
export abstract class HealthProbe {
  abstract check(): Promise<HealthReport>;
}

const reportOn = async (
  appliedMigrations: () => Promise<string[]>,
  sandbox: () => string | null,
): Promise<HealthReport> => {
  try {
    const applied = new Set(await appliedMigrations());
    const pending = Object.keys(MIGRATIONS).filter((m) => !applied.has(m));
    return { db: 'reachable', migrations: pending.length === 0 ? 'current' : 'pending', sandbox: sandbox() };
  } catch {
    return { db: 'unreachable', migrations: 'unknown', sandbox: sandbox() };
  }
};

/**
 * DB reachable and migrations current, checked on a separate read-only
 * connection so a health probe never waits behind the writer.
 */
export class SqliteHealthProbe extends HealthProbe implements OnApplicationShutdown {
  private readonly db: Database.Database;

  constructor(
    path: string,
    private readonly sandbox: () => string | null,
  ) {
    super();
    this.db = new Database(resolve(path), { readonly: true, fileMustExist: true, timeout: 1000 });
  }

  check(): Promise<HealthReport> {
    return reportOn(
      async () =>
        (this.db.prepare('SELECT name FROM kysely_migration').all() as Array<{ name: string }>).map(
          (r) => r.name,
        ),
      this.sandbox,
    );
  }

  onApplicationShutdown(): void {
    this.db.close();
  }
}

/** The same on PostgreSQL, through the storage's pool (a read there never waits behind an append). */
export class PostgresHealthProbe extends HealthProbe {
  constructor(
    private readonly db: Kysely<unknown>,
    private readonly sandbox: () => string | null,
  ) {
    super();
  }

  check(): Promise<HealthReport> {
    return reportOn(
      async () =>
        (await sql<{ name: string }>`SELECT name FROM kysely_migration`.execute(this.db)).rows.map(
          (r) => r.name,
        ),
      this.sandbox,
    );
  }
}
