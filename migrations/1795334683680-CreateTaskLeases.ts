/* eslint-disable @typescript-eslint/no-explicit-any -- migrations take Kysely<any> so an old one never breaks when the schema types move on */
import { Kysely } from 'kysely';

/**
 * Who runs each task: one row per task a process has claimed. Claiming bumps
 * `epoch`; every append a lease holder makes is checked against it inside the
 * append transaction (fencing), so a process whose lease was taken over can
 * write nothing more. `expires_at` is epoch milliseconds, renewed by the
 * owner's heartbeat; a task whose lease expired may be claimed by another
 * process (crash recovery). Not derived from the log: it says who may write
 * the log, not what happened.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('task_leases')
    .addColumn('task_id', 'text', (c) => c.primaryKey())
    .addColumn('owner', 'text', (c) => c.notNull())
    .addColumn('epoch', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('task_leases_expires_at').on('task_leases').column('expires_at').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('task_leases').execute();
}
