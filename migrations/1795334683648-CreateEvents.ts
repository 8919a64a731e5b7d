/* eslint-disable @typescript-eslint/no-explicit-any -- migrations take Kysely<any> so an old one never breaks when the schema types move on */
import { Kysely, sql } from 'kysely';
import { isPostgres, isSqlite } from './dialect';

/** The append-only event log; the database itself refuses UPDATE and DELETE. */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('events')
    .addColumn('position', isPostgres(db) ? 'bigint' : 'integer', (c) =>
      isPostgres(db) ? c.primaryKey().generatedAlwaysAsIdentity() : c.primaryKey().autoIncrement(),
    )
    .addColumn('event_id', 'text', (c) => c.notNull().unique())
    .addColumn('task_id', 'text', (c) => c.notNull())
    .addColumn('session_id', 'text', (c) => c.notNull())
    .addColumn('sequence', 'integer', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('payload', 'text', (c) => c.notNull())
    .addColumn('causation_id', 'text')
    .addColumn('correlation_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('events_task_sequence_unique', ['task_id', 'sequence'])
    .execute();
  await db.schema
    .createIndex('events_type_position_idx')
    .on('events')
    .columns(['type', 'position'])
    .execute();
  await db.schema
    .createIndex('events_session_idx')
    .on('events')
    .columns(['session_id', 'position'])
    .execute();

  if (isSqlite(db)) {
    await sql`CREATE TRIGGER events_no_update BEFORE UPDATE ON events BEGIN SELECT RAISE(ABORT, 'events are append-only'); END`.execute(
      db,
    );
    await sql`CREATE TRIGGER events_no_delete BEFORE DELETE ON events BEGIN SELECT RAISE(ABORT, 'events are append-only'); END`.execute(
      db,
    );
  } else if (isPostgres(db)) {
    await sql`CREATE FUNCTION events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'events are append-only'; END $$`.execute(db);
    await sql`CREATE TRIGGER events_no_update_delete BEFORE UPDATE OR DELETE ON events
      FOR EACH ROW EXECUTE FUNCTION events_append_only()`.execute(db);
    await sql`CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
      FOR EACH STATEMENT EXECUTE FUNCTION events_append_only()`.execute(db);
  }
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('events').execute();
  if (isPostgres(db)) await sql`DROP FUNCTION IF EXISTS events_append_only()`.execute(db);
}
