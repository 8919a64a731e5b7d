import Database from 'better-sqlite3';
import { resolve } from 'node:path';
import { OnApplicationShutdown } from '@nestjs/common';
import { MIGRATIONS } from '@runledger/migrations';

export interface HealthReport {
  db: 'reachable' | 'unreachable';
  migrations: 'current' | 'pending' | 'unknown';
  sandbox: string | null;
}

/**
 * DB reachable and migrations current, checked on a separate read-only
 * connection so a health probe never waits behind the writer.
 */
export class SqliteHealthProbe implements OnApplicationShutdown {
  private readonly db: Database.Database;

  constructor(
    path: string,
    private readonly sandbox: () => string | null,
  ) {
    this.db = new Database(resolve(path), { readonly: true, fileMustExist: true, timeout: 1000 });
  }

  async check(): Promise<HealthReport> {
    try {
      const applied = new Set(
        (this.db.prepare('SELECT name FROM kysely_migration').all() as Array<{ name: string }>).map(
          (r) => r.name,
        ),
      );
      const pending = Object.keys(MIGRATIONS).filter((m) => !applied.has(m));
      return {
        db: 'reachable',
        migrations: pending.length === 0 ? 'current' : 'pending',
        sandbox: this.sandbox(),
      };
    } catch {
      return { db: 'unreachable', migrations: 'unknown', sandbox: this.sandbox() };
    }
  }

  onApplicationShutdown(): void {
    this.db.close();
  }
}
