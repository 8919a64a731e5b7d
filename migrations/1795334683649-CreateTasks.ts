/* eslint-disable @typescript-eslint/no-explicit-any -- migrations take Kysely<any> so an old one never breaks when the schema types move on */
import { Kysely } from 'kysely';

/** The task-state projection (libs/state-store), rebuilt from the events at will. */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('tasks')
    .addColumn('task_id', 'text', (c) => c.primaryKey())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('session_id', 'text', (c) => c.notNull())
    .addColumn('input', 'text', (c) => c.notNull())
    .addColumn('last_directive', 'text')
    .addColumn('pending_requests', 'text', (c) => c.notNull())
    .addColumn('stop_reason', 'text')
    .addColumn('stop_detail', 'text')
    .addColumn('result', 'text')
    .addColumn('usage', 'text', (c) => c.notNull())
    .addColumn('rounds', 'integer', (c) => c.notNull())
    .addColumn('last_seq', 'integer', (c) => c.notNull())
    .addColumn('idempotency_key', 'text', (c) => c.unique())
    .addColumn('request_hash', 'text')
    .addColumn('accept_checks', 'text', (c) => c.notNull())
    .addColumn('budgets', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('tasks_created_idx').on('tasks').columns(['created_at', 'task_id']).execute();
  await db.schema
    .createIndex('tasks_status_created_idx')
    .on('tasks')
    .columns(['status', 'created_at', 'task_id'])
    .execute();
  await db.schema
    .createIndex('tasks_session_created_idx')
    .on('tasks')
    .columns(['session_id', 'created_at', 'task_id'])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('tasks').execute();
}
