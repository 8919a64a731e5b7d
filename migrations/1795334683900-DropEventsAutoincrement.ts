/* eslint-disable @typescript-eslint/no-explicit-any -- migrations take Kysely<any> so an old one never breaks when the schema types move on */
import { Kysely, sql } from 'kysely';
import { isSqlite } from './dialect';

/**
 * SQLite: event positions without AUTOINCREMENT. AUTOINCREMENT keeps the highest position given in
 * `sqlite_sequence` and rewrites that row in every transaction that appends, one more page in the
 * WAL per commit. Positions are still never reused, also once the highest events left the table for
 * the archive (SQLite's own choice without AUTOINCREMENT is one past the highest live row):
 * `event_position_floor` holds the highest position that ever left `events` (kept by a DELETE
 * trigger, which writes only when a delete goes past it), started at what `sqlite_sequence` held,
 * and every insert names its position as one past the higher of the two (NEXT_EVENT_POSITION in
 * libs/event-store/src/sqlite/positions.ts). A rolled-back append gives its positions back, as
 * before, so positions stay without gaps.
 *
 * SQLite cannot drop AUTOINCREMENT in place: the table is rebuilt (SQLite's documented procedure:
 * new table, rows copied as stored, old table dropped, new one renamed) in the migration's
 * transaction, and its indexes and triggers are created again from their stored definitions. It
 * takes about 2.6 s for 200,000 events (122 MiB); the old table's pages stay in the file as free
 * pages, filled by new events or handed back by `runledger vacuum`.
 * PostgreSQL positions come from an identity sequence, which writes no row per commit: nothing there.
 */
export async function up(db: Kysely<any>): Promise<void> {
  if (!isSqlite(db)) return;
  const given = await sql<{ seq: number | null }>`
    SELECT max(coalesce((SELECT max(position) FROM events), 0),
               coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)) AS seq`.execute(db);
  await rebuildEvents(db, false);
  await sql`CREATE TABLE event_position_floor (
    id integer PRIMARY KEY CHECK (id = 1),
    position integer NOT NULL)`.execute(db);
  await sql`INSERT INTO event_position_floor (id, position) VALUES (1, ${Number(given.rows[0]?.seq ?? 0)})`.execute(
    db,
  );
  await sql`CREATE TRIGGER events_position_floor AFTER DELETE ON events
    WHEN OLD.position > (SELECT position FROM event_position_floor WHERE id = 1)
    BEGIN UPDATE event_position_floor SET position = OLD.position WHERE id = 1; END`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  if (!isSqlite(db)) return;
  const given = await sql<{ seq: number | null }>`
    SELECT max(coalesce((SELECT max(position) FROM events), 0),
               coalesce((SELECT position FROM event_position_floor WHERE id = 1), 0)) AS seq`.execute(db);
  await sql`DROP TRIGGER events_position_floor`.execute(db);
  await sql`DROP TABLE event_position_floor`.execute(db);
  await rebuildEvents(db, true);
  const seq = Number(given.rows[0]?.seq ?? 0);
  if (seq > 0) await sql`INSERT INTO sqlite_sequence (name, seq) VALUES ('events', ${seq})`.execute(db);
}

/**
 * `events` again with or without AUTOINCREMENT, rows copied as stored (`INSERT ... SELECT *` into an
 * empty table of the same columns copies records without decoding them), then its indexes and
 * triggers as they were defined (the DROP takes them with the table).
 */
async function rebuildEvents(db: Kysely<any>, autoincrement: boolean): Promise<void> {
  const attached = (
    await sql<{ sql: string }>`SELECT sql FROM sqlite_schema
      WHERE tbl_name = 'events' AND type IN ('index', 'trigger') AND sql IS NOT NULL
      ORDER BY type, name`.execute(db)
  ).rows.map((r) => r.sql);
  await db.schema
    .createTable('events_rebuilt')
    .addColumn('position', 'integer', (c) =>
      autoincrement ? c.primaryKey().autoIncrement() : c.primaryKey(),
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
    .addColumn('schema_version', 'integer', (c) => c.notNull().defaultTo(1))
    .addUniqueConstraint('events_task_sequence_unique', ['task_id', 'sequence'])
    .execute();
  await sql`INSERT INTO events_rebuilt SELECT * FROM events`.execute(db);
  await sql`DROP TABLE events`.execute(db);
  await sql`ALTER TABLE events_rebuilt RENAME TO events`.execute(db);
  for (const definition of attached) await sql.raw(definition).execute(db);
}
