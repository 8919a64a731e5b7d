import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MIGRATIONS, migrateToLatest } from '@runledger/migrations';
import { Migrator } from 'kysely';
import { chunks, taskReceived } from '../testing/events';
import { SqliteHandle, openSqlite } from './open-sqlite';
import { SqliteEventStore } from './sqlite-event-store';

/** The last migration before DropEventsAutoincrement: a database as it was before positions lost AUTOINCREMENT. */
const BEFORE = '1795334683870-CreateStreamKeys';
const AFTER = '1795334683900-DropEventsAutoincrement';

/** What the archiver records before it deletes a task's events (the delete trigger asks for it). */
function markArchived(handle: SqliteHandle, taskId: string, lastSequence: number): void {
  const at = new Date().toISOString();
  handle.raw
    .prepare(
      `INSERT INTO archive_segments (segment_id, sha256, bytes, task_count, event_count, first_position, last_position, created_at)
       VALUES (?, 'x', 0, 1, 0, 0, 0, ?)`,
    )
    .run(`seg-${taskId}`, at);
  handle.raw
    .prepare(
      `INSERT INTO archived_tasks (task_id, root_task_id, session_id, segment_id, last_sequence, event_count, first_position, last_position, archived_at)
       VALUES (?, ?, 's', ?, ?, 0, 0, 0, ?)`,
    )
    .run(taskId, taskId, `seg-${taskId}`, lastSequence, at);
}

const archive = (handle: SqliteHandle, taskId: string, lastSequence: number): void => {
  markArchived(handle, taskId, lastSequence);
  handle.raw.prepare('DELETE FROM events WHERE task_id = ?').run(taskId);
};

const schemaOf = (handle: SqliteHandle) =>
  handle.raw
    .prepare(
      "SELECT type, name FROM sqlite_schema WHERE tbl_name = 'events' AND type IN ('index', 'trigger') ORDER BY type, name",
    )
    .all() as Array<{ type: string; name: string }>;

describe('event positions on SQLite: never given twice, without AUTOINCREMENT', () => {
  let dir: string;
  const open: SqliteHandle[] = [];
  const openAt = (file = 'db.sqlite') => {
    const handle = openSqlite({ path: join(dir, file), synchronous: 'NORMAL' });
    open.push(handle);
    return handle;
  };
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'runledger-positions-'));
  });
  afterEach(async () => {
    for (const h of open.splice(0)) await h.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('an append rewrites no sqlite_sequence row; positions run on without gaps, a refused append gives its positions back', async () => {
    const handle = openAt();
    await migrateToLatest(handle.db);
    const sut = new SqliteEventStore(handle);
    await sut.append('t1', [taskReceived(), ...chunks(2)], { expected: 'no_stream' });
    await expect(sut.append('t1', chunks(2), { expected: 1 })).rejects.toThrow();
    const { positions } = await sut.append('t2', [taskReceived()], { expected: 'no_stream' });
    expect(positions).toEqual([4]);
    expect(
      handle.raw.prepare("SELECT count(*) AS n FROM sqlite_sequence WHERE name = 'events'").get(),
    ).toEqual({
      n: 0,
    });
    expect(await sut.head()).toEqual({ position: 4, event_count: 4 });
    await sut.close();
  });

  it('the newest events archived away: their positions are not given again, also after a reopen and a VACUUM', async () => {
    const first = openAt();
    await migrateToLatest(first.db);
    const store = new SqliteEventStore(first);
    await store.append('t1', [taskReceived(), ...chunks(1)], { expected: 'no_stream' });
    await store.append('t2', [taskReceived(), ...chunks(2)], { expected: 'no_stream' }); // positions 3-5
    await store.close();
    archive(first, 't2', 3);
    await first.close();

    const second = openAt();
    await migrateToLatest(second.db);
    second.raw.exec('VACUUM');
    const sut = new SqliteEventStore(second);
    expect(await sut.head()).toEqual({ position: 5, event_count: 5 });
    expect((await sut.append('t3', [taskReceived()], { expected: 'no_stream' })).positions).toEqual([6]);
    expect((await sut.append('t1', chunks(1), { expected: 2 })).positions).toEqual([7]);
    await sut.close();
  });

  it('migrates a database with events: rows, indexes and triggers as they were, the highest position given kept', async () => {
    const handle = openAt();
    const migrator = new Migrator({
      db: handle.db,
      provider: { getMigrations: async () => ({ ...MIGRATIONS }) },
    });
    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    const insert = handle.raw.prepare(
      `INSERT INTO events (event_id, task_id, session_id, sequence, type, payload, causation_id, correlation_id, created_at)
       VALUES (?, ?, 's', ?, ?, '{}', NULL, 'c', '2026-11-29T00:00:00.000Z')`,
    );
    for (let i = 1; i <= 40; i++)
      insert.run(`e${i}`, i <= 30 ? 'old' : 'newest', i <= 30 ? i : i - 30, i % 7 ? 'A' : 'B');
    archive(handle, 'newest', 10); // positions 31-40 leave; sqlite_sequence remembers 40
    const rows = handle.raw.prepare('SELECT * FROM events ORDER BY position').all();
    const attached = schemaOf(handle);
    expect(attached.length).toBeGreaterThanOrEqual(6);

    expect((await migrateToLatest(handle.db)).results?.map((r) => r.migrationName)).toContain(AFTER);
    const table = handle.raw.prepare("SELECT sql FROM sqlite_schema WHERE name = 'events'").get() as {
      sql: string;
    };
    expect(table.sql).not.toMatch(/autoincrement/i);
    expect(handle.raw.prepare('SELECT * FROM events ORDER BY position').all()).toEqual(rows);
    expect(schemaOf(handle)).toEqual(
      [...attached, { type: 'trigger', name: 'events_position_floor' }].sort(
        (a, b) => a.type.localeCompare(b.type) || a.name.localeCompare(b.name),
      ),
    );
    expect(handle.raw.pragma('integrity_check', { simple: true })).toBe('ok');
    // the append-only triggers came back with the table
    expect(() => handle.raw.prepare("DELETE FROM events WHERE task_id = 'old'").run()).toThrow(/append-only/);
    const sut = new SqliteEventStore(handle);
    expect(await sut.head()).toEqual({ position: 40, event_count: 40 });
    expect((await sut.append('t3', [taskReceived()], { expected: 'no_stream' })).positions).toEqual([41]);
    await sut.close();

    // and back: AUTOINCREMENT again, remembering the highest position given
    expect((await migrator.migrateTo(BEFORE)).error).toBeUndefined();
    expect(handle.raw.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'events'").get()).toEqual({
      seq: 41,
    });
    insert.run('e-after', 't4', 1, 'A');
    expect(handle.raw.prepare("SELECT position FROM events WHERE event_id = 'e-after'").get()).toEqual({
      position: 42,
    });
    expect(handle.raw.pragma('integrity_check', { simple: true })).toBe('ok');
  });
});
