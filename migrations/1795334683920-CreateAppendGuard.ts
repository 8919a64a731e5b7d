/* eslint-disable @typescript-eslint/no-explicit-any -- migrations take Kysely<any> so an old one never breaks when the schema types move on */
import { Kysely, sql } from 'kysely';
import { isPostgres } from './dialect';

/**
 * PostgreSQL: `append_guard`, the check a PgEventStore append decided on remembered stream heads
 * runs before its insert (in the same statement, under the append lock): every stream stands at
 * its head (`versions`, its last event `last_event_ids`; 0 and NULL for a stream with no event)
 * and no key row of `sessions` or `streams` is erased. A PL/pgSQL function keeps its plans per
 * connection: the same check written into the insert was planned anew on every append (~0.3 ms
 * for 16 streams, more than it takes to run). SQLite appends need none.
 */
export async function up(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return;
  await sql`CREATE FUNCTION append_guard(
      task_ids text[], versions integer[], last_event_ids text[], sessions text[], streams text[])
    RETURNS boolean LANGUAGE plpgsql STABLE AS $$
    BEGIN
      RETURN NOT EXISTS (
          SELECT 1 FROM unnest(task_ids, versions, last_event_ids) AS h(task_id, version, last_event_id)
          WHERE coalesce((SELECT max(e.sequence) FROM events e WHERE e.task_id = h.task_id), 0) <> h.version
             OR (h.version > 0 AND NOT EXISTS (SELECT 1 FROM events e
                   WHERE e.task_id = h.task_id AND e.sequence = h.version AND e.event_id = h.last_event_id)))
        AND NOT EXISTS (SELECT 1 FROM data_keys WHERE session_id = ANY(sessions) AND erased_at IS NOT NULL)
        AND NOT EXISTS (SELECT 1 FROM stream_keys WHERE stream_id = ANY(streams) AND erased_at IS NOT NULL);
    END $$`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return;
  await sql`DROP FUNCTION append_guard(text[], integer[], text[], text[], text[])`.execute(db);
}
