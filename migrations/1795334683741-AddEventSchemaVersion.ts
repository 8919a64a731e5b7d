/* eslint-disable @typescript-eslint/no-explicit-any -- migrations take Kysely<any> so an old one never breaks when the schema types move on */
import { Kysely } from 'kysely';

/**
 * Every event says which version of its payload's shape it was written with; readers upcast older
 * ones. Rows written before the column are version 1, the first shape of every event type. Adding a
 * column with a constant default rewrites no row (SQLite and PostgreSQL 11+ keep it in the schema).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('events')
    .addColumn('schema_version', 'integer', (c) => c.notNull().defaultTo(1))
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('events').dropColumn('schema_version').execute();
}
