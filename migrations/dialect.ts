import { Kysely, PostgresAdapter, SqliteAdapter } from 'kysely';

/** Dialect checks for the few statements that cannot be written portably. */
export const isSqlite = <DB>(db: Kysely<DB>): boolean => db.getExecutor().adapter instanceof SqliteAdapter;
export const isPostgres = <DB>(db: Kysely<DB>): boolean =>
  db.getExecutor().adapter instanceof PostgresAdapter;
