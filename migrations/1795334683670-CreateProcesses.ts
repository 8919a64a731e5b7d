/* eslint-disable @typescript-eslint/no-explicit-any -- migrations take Kysely<any> so an old one never breaks when the schema types move on */
import { Kysely } from 'kysely';

/**
 * The runledger processes that have this database open (server, CLI), so one
 * can tell that another may be running tasks before it resumes them. Not task
 * state: a row lives as long as its process; a crashed process's row is
 * recognised as dead (its pid is gone) and removed by the next reader.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('processes')
    .addColumn('hostname', 'text', (c) => c.notNull())
    .addColumn('pid', 'integer', (c) => c.notNull())
    /** ISO time the process started, so a reused pid is not taken for the process that registered */
    .addColumn('started_at', 'text', (c) => c.notNull())
    .addColumn('command', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('processes_pk', ['hostname', 'pid'])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('processes').execute();
}
