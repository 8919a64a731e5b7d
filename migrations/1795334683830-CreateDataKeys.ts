/* eslint-disable @typescript-eslint/no-explicit-any -- migrations take Kysely<any> so an old one never breaks when the schema types move on */
import { Kysely } from 'kysely';
import { isPostgres } from './dialect';

/**
 * The sessions' data keys for erasure by crypto-shredding, on PostgreSQL: a row per session with
 * its AES-256 key, or with none and `erased_at` once erased (the tombstone keeps the session
 * erased). SQLite keeps its keys in a file of their own beside the database (`<db>.keys`, see
 * libs/event-store/src/sealing/sqlite-data-keys.ts), so nothing is created there.
 */
export async function up(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return;
  await db.schema
    .createTable('data_keys')
    .addColumn('session_id', 'text', (c) => c.primaryKey())
    .addColumn('key_id', 'text')
    .addColumn('key', 'bytea')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('erased_at', 'text')
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return;
  await db.schema.dropTable('data_keys').execute();
}
