/* eslint-disable @typescript-eslint/no-explicit-any -- migrations take Kysely<any> so an old one never breaks when the schema types move on */
import { Kysely, sql } from 'kysely';
import { up as createAppendGuard } from './1795334683920-CreateAppendGuard';
import { isPostgres } from './dialect';

/**
 * PostgreSQL: `append_guard` (CreateAppendGuard) reads each stream's last event through the
 * (task_id, sequence) index, whatever the table held when the connection planned it. The function's
 * plans are kept per connection, and a plan made while `events` was small scanned the whole table
 * once it had grown (a guard of one stream: 1.3 ms at 2,000 events, 11.6 ms at 8,000). One probe per
 * stream (`ORDER BY sequence DESC LIMIT 1`), and no sequential scan in the function at all.
 */
export async function up(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return;
  await sql`CREATE OR REPLACE FUNCTION append_guard(
      task_ids text[], versions integer[], last_event_ids text[], sessions text[], streams text[])
    RETURNS boolean LANGUAGE plpgsql STABLE SET enable_seqscan = off AS $$
    DECLARE
      head record;
    BEGIN
      FOR i IN 1 .. coalesce(array_length(task_ids, 1), 0) LOOP
        SELECT e.sequence, e.event_id INTO head FROM events e
          WHERE e.task_id = task_ids[i] ORDER BY e.sequence DESC LIMIT 1;
        IF coalesce(head.sequence, 0) <> versions[i]
           OR (versions[i] > 0 AND head.event_id IS DISTINCT FROM last_event_ids[i]) THEN
          RETURN false;
        END IF;
      END LOOP;
      RETURN NOT EXISTS (SELECT 1 FROM data_keys WHERE session_id = ANY(sessions) AND erased_at IS NOT NULL)
        AND NOT EXISTS (SELECT 1 FROM stream_keys WHERE stream_id = ANY(streams) AND erased_at IS NOT NULL);
    END $$`.execute(db);
}

/** CreateAppendGuard's function again. */
export async function down(db: Kysely<any>): Promise<void> {
  if (!isPostgres(db)) return;
  await sql`DROP FUNCTION append_guard(text[], integer[], text[], text[], text[])`.execute(db);
  await createAppendGuard(db);
}
