import Database from 'better-sqlite3';
import { resolve } from 'node:path';
import { MIGRATIONS } from '@runledger/migrations';
import { HealthReport } from '../runtime.port';

/**
 * DB reachable and migrations current, checked on a separate read-only
 * connection so a health probe never waits behind the writer.
 */
export class SqliteHealthProbe {
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

  close(): void {
    this.db.close();
  }
}
