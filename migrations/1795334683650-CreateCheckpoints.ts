/* eslint-disable @typescript-eslint/no-explicit-any -- migrations take Kysely<any> so an old one never breaks when the schema types move on */
import { Kysely } from 'kysely';

/** Snapshots of a task's state and context, each named by a CHECKPOINT_SAVED event. */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('checkpoints')
    .addColumn('checkpoint_id', 'text', (c) => c.primaryKey())
    .addColumn('task_id', 'text', (c) => c.notNull())
    .addColumn('label', 'text', (c) => c.notNull())
    .addColumn('at_sequence', 'integer', (c) => c.notNull())
    /** sequence of the CHECKPOINT_SAVED event itself */
    .addColumn('event_sequence', 'integer', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('context', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('checkpoints_task_seq_idx')
    .on('checkpoints')
    .columns(['task_id', 'event_sequence'])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('checkpoints').execute();
}
