/* eslint-disable @typescript-eslint/no-explicit-any -- migrations take Kysely<any> so an old one never breaks when the schema types move on */
import { Kysely, sql } from 'kysely';
import { isPostgres } from './dialect';

/**
 * The archive finds a task tree's members by TASK_RECEIVED's root_task_id: without an index that is
 * a scan of every TASK_RECEIVED payload per batch. A partial expression index (only TASK_RECEIVED
 * rows, so other appends pay nothing); queries name its condition literally.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await (
    isPostgres(db)
      ? sql`CREATE INDEX events_received_root ON events ((payload::jsonb ->> 'root_task_id')) WHERE type = 'TASK_RECEIVED'`
      : sql`CREATE INDEX events_received_root ON events (json_extract(payload, '$.root_task_id')) WHERE type = 'TASK_RECEIVED'`
  ).execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP INDEX events_received_root`.execute(db);
}
