/* eslint-disable @typescript-eslint/no-explicit-any -- migrations take Kysely<any> so an old one never breaks when the schema types move on */
import { Kysely, sql } from 'kysely';
import { isSqlite } from './dialect';

/**
 * `task_leases` in fewer pages: a task's claim and its release each rewrite the lease row in the
 * commit that carries them. No query looks leases up by `expires_at` (every statement names its
 * task ids: the claim's upsert, the renewal, `claimable`, the append's fencing check), so its index
 * goes: it was rewritten by every claim, renewal and release. On SQLite the table becomes WITHOUT
 * ROWID, the row kept in its primary key's b-tree, so a claim writes one b-tree, not a table and its
 * key's index (rebuilt: SQLite cannot change that in place; leases are one short row per task).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('task_leases_expires_at').execute();
  if (isSqlite(db)) await rebuildLeases(db, true);
}

export async function down(db: Kysely<any>): Promise<void> {
  if (isSqlite(db)) await rebuildLeases(db, false);
  await db.schema.createIndex('task_leases_expires_at').on('task_leases').column('expires_at').execute();
}

async function rebuildLeases(db: Kysely<any>, withoutRowid: boolean): Promise<void> {
  const table = db.schema
    .createTable('task_leases_rebuilt')
    .addColumn('task_id', 'text', (c) => c.primaryKey())
    .addColumn('owner', 'text', (c) => c.notNull())
    .addColumn('epoch', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull());
  await (withoutRowid ? table.modifyEnd(sql`WITHOUT ROWID`) : table).execute();
  await sql`INSERT INTO task_leases_rebuilt (task_id, owner, epoch, expires_at)
    SELECT task_id, owner, epoch, expires_at FROM task_leases`.execute(db);
  await sql`DROP TABLE task_leases`.execute(db);
  await sql`ALTER TABLE task_leases_rebuilt RENAME TO task_leases`.execute(db);
}
