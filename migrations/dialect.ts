import { Kysely, PostgresAdapter, SqliteAdapter } from 'kysely';

/** Dialect checks for the few statements that cannot be written portably. */
export const isSqlite = (db: Kysely<unknown>): boolean => db.getExecutor().adapter instanceof SqliteAdapter;
export const isPostgres = (db: Kysely<unknown>): boolean =>
  db.getExecutor().adapter instanceof PostgresAdapter;
