/* eslint-disable @typescript-eslint/no-explicit-any -- migrations take Kysely<any> so an old one never breaks when the schema types move on */
import { Kysely } from 'kysely';
import { isPostgres } from './dialect';

/**
 * The streams' data keys on PostgreSQL: a row per stream owning a key (a task's stream, so one task
 * tree can be erased without its session's other trees), with its AES-256 key, or with none and
 * `erased_at` once its tree or session was erased. `data_keys` keeps the sessions' own rows. SQLite
 * keeps both tables in `<db>.keys` (libs/event-store/src/sealing/sqlite-data-keys.ts): nothing here.
 */
export async function up(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return;
  await db.schema
    .createTable('stream_keys')
    .addColumn('stream_id', 'text', (c) => c.primaryKey())
    .addColumn('session_id', 'text', (c) => c.notNull())
    .addColumn('key_id', 'text', (c) => c.unique())
    .addColumn('key', 'bytea')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('erased_at', 'text')
    .execute();
  await db.schema.createIndex('stream_keys_session').on('stream_keys').column('session_id').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return;
  await db.schema.dropTable('stream_keys').execute();
}
