/* eslint-disable @typescript-eslint/no-explicit-any -- migrations take Kysely<any> so an old one never breaks when the schema types move on */
import { Kysely, sql } from 'kysely';
import { isPostgres, isSqlite } from './dialect';

/**
 * The archive: finished task trees moved out of the live `events` table into checksummed segments
 * (files beside a SQLite database; rows of `archive_segments` on PostgreSQL, in the same transaction
 * as the move). `archived_tasks` says where each task's events went; the task's `tasks` row stays as
 * its summary.
 *
 * The append-only triggers get one narrow exception, written into them: an event may be deleted only
 * once `archived_tasks` records its task, through at least its sequence, in a segment whose checksum
 * is recorded; and nothing may be appended to a task while it is archived (a restore takes its record
 * away first, in the transaction that puts its events back). UPDATE and TRUNCATE stay refused.
 */
export async function up(db: Kysely<any>): Promise<void> {
  const postgres = isPostgres(db);
  await db.schema
    .createTable('archive_segments')
    .addColumn('segment_id', 'text', (c) => c.primaryKey())
    .addColumn('sha256', 'text', (c) => c.notNull())
    .addColumn('bytes', 'integer', (c) => c.notNull())
    .addColumn('task_count', 'integer', (c) => c.notNull())
    .addColumn('event_count', 'integer', (c) => c.notNull())
    .addColumn('first_position', postgres ? 'bigint' : 'integer', (c) => c.notNull())
    .addColumn('last_position', postgres ? 'bigint' : 'integer', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    // PostgreSQL keeps the segment here; SQLite in a file named after segment_id
    .addColumn('content', postgres ? 'bytea' : 'blob')
    .execute();
  await db.schema
    .createTable('archived_tasks')
    .addColumn('task_id', 'text', (c) => c.primaryKey())
    .addColumn('root_task_id', 'text', (c) => c.notNull())
    .addColumn('session_id', 'text', (c) => c.notNull())
    .addColumn('segment_id', 'text', (c) => c.notNull().references('archive_segments.segment_id'))
    .addColumn('last_sequence', 'integer', (c) => c.notNull())
    .addColumn('event_count', 'integer', (c) => c.notNull())
    .addColumn('first_position', postgres ? 'bigint' : 'integer', (c) => c.notNull())
    .addColumn('last_position', postgres ? 'bigint' : 'integer', (c) => c.notNull())
    .addColumn('archived_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('archived_tasks_segment_idx')
    .on('archived_tasks')
    .column('segment_id')
    .execute();
  await db.schema
    .createIndex('archive_segments_position_idx')
    .on('archive_segments')
    .columns(['first_position', 'last_position'])
    .execute();

  if (isSqlite(db)) {
    await sql`DROP TRIGGER events_no_delete`.execute(db);
    await sql`CREATE TRIGGER events_no_delete BEFORE DELETE ON events
      WHEN NOT EXISTS (SELECT 1 FROM archived_tasks a WHERE a.task_id = OLD.task_id AND a.last_sequence >= OLD.sequence)
      BEGIN SELECT RAISE(ABORT, 'events are append-only'); END`.execute(db);
    await sql`CREATE TRIGGER events_not_archived BEFORE INSERT ON events
      WHEN EXISTS (SELECT 1 FROM archived_tasks a WHERE a.task_id = NEW.task_id)
      BEGIN SELECT RAISE(ABORT, 'task is archived'); END`.execute(db);
  } else if (postgres) {
    await sql`CREATE OR REPLACE FUNCTION events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM archived_tasks a
             WHERE a.task_id = OLD.task_id AND a.last_sequence >= OLD.sequence) THEN
          RETURN OLD;
        END IF;
        RAISE EXCEPTION 'events are append-only';
      END $$`.execute(db);
    await sql`CREATE FUNCTION events_not_archived() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF EXISTS (SELECT 1 FROM archived_tasks a WHERE a.task_id = NEW.task_id) THEN
          RAISE EXCEPTION 'task is archived';
        END IF;
        RETURN NEW;
      END $$`.execute(db);
    await sql`CREATE TRIGGER events_not_archived BEFORE INSERT ON events
      FOR EACH ROW EXECUTE FUNCTION events_not_archived()`.execute(db);
  }
}

export async function down(db: Kysely<any>): Promise<void> {
  if (isSqlite(db)) {
    await sql`DROP TRIGGER events_not_archived`.execute(db);
    await sql`DROP TRIGGER events_no_delete`.execute(db);
    await sql`CREATE TRIGGER events_no_delete BEFORE DELETE ON events BEGIN SELECT RAISE(ABORT, 'events are append-only'); END`.execute(
      db,
    );
  } else if (isPostgres(db)) {
    await sql`DROP TRIGGER events_not_archived ON events`.execute(db);
    await sql`DROP FUNCTION events_not_archived()`.execute(db);
    await sql`CREATE OR REPLACE FUNCTION events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'events are append-only'; END $$`.execute(db);
  }
  await db.schema.dropTable('archived_tasks').execute();
  await db.schema.dropTable('archive_segments').execute();
}
