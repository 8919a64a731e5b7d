/* eslint-disable @typescript-eslint/no-explicit-any -- migrations take Kysely<any> so an old one never breaks when the schema types move on */
import { Kysely, sql } from 'kysely';
import { isPostgres } from './dialect';

/**
 * PostgreSQL only: how many events the log holds, kept by every append
 * transaction (under the append lock), so the admin log's head is one row
 * read instead of count(*) over the whole table. Positions come from a
 * sequence there, which a refused append leaves gaps in, so max(position) is
 * not the count. SQLite needs none: its positions have no gaps.
 */
export async function up(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return;
  await db.schema
    .createTable('event_log_head')
    .addColumn('id', 'integer', (c) => c.primaryKey().check(sql`id = 1`))
    .addColumn('event_count', 'bigint', (c) => c.notNull())
    .execute();
  // the migrator holds its own lock; appends of an older instance meanwhile are counted by the next rebuild
  await sql`INSERT INTO event_log_head (id, event_count) SELECT 1, count(*) FROM events`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return;
  await db.schema.dropTable('event_log_head').execute();
}
