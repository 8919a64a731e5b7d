/* eslint-disable @typescript-eslint/no-explicit-any -- migrations take Kysely<any> so an old one never breaks when the schema types move on */
import { Kysely, sql } from 'kysely';
import { isPostgres } from './dialect';

/**
 * The archive's catalog on PostgreSQL: the second tier of retention. Tasks archived long enough ago
 * leave the live `tasks` and `archived_tasks` tables for `catalog_tasks` and `catalog_archived_tasks`
 * (same columns), so the live tables and their indexes stop growing with the history. They are
 * tables of the same schema, beside `archive_segments` (which holds the segments themselves on
 * PostgreSQL): a deployment that runs one schema per instance keeps its catalog with it, and
 * pg_dump copies it. SQLite keeps its catalog in a file of its own beside the archive
 * (`<db>.archive/catalog.db`, see libs/event-store/src/archive/archive-catalog.ts): nothing is
 * created there.
 *
 * A catalogued task takes no events either: the insert trigger also looks in the catalog for a
 * stream's first event (an append to a catalogued task finds no live head, so it would start at 1).
 */
export async function up(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return;
  await sql`CREATE TABLE catalog_tasks (LIKE tasks INCLUDING DEFAULTS)`.execute(db);
  await sql`ALTER TABLE catalog_tasks ADD PRIMARY KEY (task_id)`.execute(db);
  await db.schema
    .createIndex('catalog_tasks_created_idx')
    .on('catalog_tasks')
    .columns(['created_at', 'task_id'])
    .execute();
  await db.schema
    .createIndex('catalog_tasks_status_created_idx')
    .on('catalog_tasks')
    .columns(['status', 'created_at', 'task_id'])
    .execute();
  await db.schema
    .createIndex('catalog_tasks_session_created_idx')
    .on('catalog_tasks')
    .columns(['session_id', 'created_at', 'task_id'])
    .execute();
  await db.schema
    .createIndex('catalog_tasks_idempotency_idx')
    .on('catalog_tasks')
    .column('idempotency_key')
    .where(sql.ref('idempotency_key'), 'is not', null)
    .execute();
  await sql`CREATE TABLE catalog_archived_tasks (LIKE archived_tasks INCLUDING DEFAULTS)`.execute(db);
  await sql`ALTER TABLE catalog_archived_tasks ADD PRIMARY KEY (task_id)`.execute(db);
  await db.schema
    .createIndex('catalog_archived_tasks_segment_idx')
    .on('catalog_archived_tasks')
    .column('segment_id')
    .execute();
  await sql`CREATE OR REPLACE FUNCTION events_not_archived() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF EXISTS (SELECT 1 FROM archived_tasks a WHERE a.task_id = NEW.task_id)
         OR (NEW.sequence = 1 AND EXISTS (SELECT 1 FROM catalog_archived_tasks c WHERE c.task_id = NEW.task_id)) THEN
        RAISE EXCEPTION 'task is archived';
      END IF;
      RETURN NEW;
    END $$`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return;
  await sql`CREATE OR REPLACE FUNCTION events_not_archived() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF EXISTS (SELECT 1 FROM archived_tasks a WHERE a.task_id = NEW.task_id) THEN
        RAISE EXCEPTION 'task is archived';
      END IF;
      RETURN NEW;
    END $$`.execute(db);
  await db.schema.dropTable('catalog_archived_tasks').execute();
  await db.schema.dropTable('catalog_tasks').execute();
}
