/* eslint-disable @typescript-eslint/no-explicit-any -- migrations take Kysely<any> so an old one never breaks when the schema types move on */
import { Kysely } from 'kysely';
import { isPostgres } from './dialect';

/**
 * The memory projection: one row per MemoryEntry (tombstoned, never removed, so
 * an index label is never reused) and the log position the projection has applied.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('memory_entries')
    .addColumn('id', 'text', (c) => c.primaryKey())
    /** the entry's label in the vector index; assigned once, in insert order */
    .addColumn('label', 'integer', (c) => c.notNull().unique())
    .addColumn('text', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('source', 'text', (c) => c.notNull())
    .addColumn('weight', isPostgres(db) ? 'double precision' : 'real', (c) => c.notNull())
    .addColumn('task_id', 'text')
    .addColumn('session_id', 'text')
    .addColumn('metadata', 'text', (c) => c.notNull())
    .addColumn('embedding_model', 'text', (c) => c.notNull())
    .addColumn('embedding_dim', 'integer', (c) => c.notNull())
    /** float32 little-endian; kept so the index can be rebuilt without calling the embedder */
    .addColumn('vector', isPostgres(db) ? 'bytea' : 'blob', (c) => c.notNull())
    .addColumn('deleted', 'integer', (c) => c.notNull().defaultTo(0))
    /** the MEMORY_WRITTEN event that created the entry */
    .addColumn('written_by', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('memory_entries_session_idx')
    .on('memory_entries')
    .columns(['session_id', 'deleted'])
    .execute();
  await db.schema.createIndex('memory_entries_task_idx').on('memory_entries').columns(['task_id']).execute();
  await db.schema
    .createTable('memory_projection')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('position', 'bigint', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('memory_projection').execute();
  await db.schema.dropTable('memory_entries').execute();
}
