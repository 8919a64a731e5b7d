import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { RuntimeEvent } from '@runledger/contracts';
import { Database, rawEventOf, segmentFolder } from '@runledger/event-store';
import { Kysely, sql } from 'kysely';
import { verifyLog } from '../log-verification';
import { SqliteStorage, Storage } from '../storage';
import { loadGoldenLog, readGoldenLog } from '../testing/golden-logs';
import { TaskLog } from '../testing/task-events';
import { TempStorage, asNew, describeEachStorage } from '../testing/temp-storage';
import { ARCHIVE_STREAM } from './archiver';
import { withArchiver } from '../testing/with-archiver';
import { parseRetention } from './retention-policy';

const golden = readGoldenLog('log-v1');
const taskIds = Object.keys(golden.states);
const treeRoot = 'task_01a225678ea5247e973608d38f74d467';
/** a day after the golden log was recorded: every task of it ended more than an hour before */
const LATER = Date.parse('2026-11-30T04:00:00Z');
const anHour = parseRetention('1h')!;

const segmentBytesOf = (temp: TempStorage<Storage>) =>
  temp.storage.driver === 'sqlite'
    ? async (id: string) =>
        (await import('node:fs')).readFileSync(`${segmentFolder(temp.path)}/${id}.jsonl.gz`)
    : undefined;

async function streams(storage: Storage): Promise<Map<string, RuntimeEvent[]>> {
  const out = new Map<string, RuntimeEvent[]>();
  for (const id of taskIds) out.set(id, await storage.eventStore.readWholeStream(id));
  return out;
}

const liveCount = async (db: Kysely<Database>, taskId: string) =>
  Number(
    (
      await db
        .selectFrom('events')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('task_id', '=', taskId)
        .executeTakeFirstOrThrow()
    ).n,
  );

describeEachStorage('Archiver', (open) => {
  let temp: TempStorage<Storage>;
  beforeEach(async () => {
    temp = await open();
    await loadGoldenLog(temp.storage.db, golden);
    await temp.storage.taskStates.rebuild();
  });
  afterEach(() => temp.dispose());

  it('moves finished trees out of the live table; every reader gets the same events, head and versions', async () => {
    const { storage } = temp;
    const before = await streams(storage);
    const rawBefore = await storage.eventStore.readStreamRaw(treeRoot);
    const headBefore = await storage.eventStore.head();
    const run = await withArchiver(temp, (a) => a.run(anHour, LATER));
    expect(run.busy).toBe(false);
    expect(new Set(run.tasks)).toEqual(new Set(taskIds));
    expect(run.events).toBe(golden.rows.length);
    for (const id of taskIds) expect(await liveCount(storage.db, id)).toBe(0);

    expect(await streams(storage)).toEqual(before);
    expect(await storage.eventStore.readStreamRaw(treeRoot)).toEqual(rawBefore);
    expect(rawBefore.map((r) => r.json)).toEqual(before.get(treeRoot)!.map((e) => rawEventOf(e).json));
    expect(await storage.eventStore.readStream(treeRoot, { after_seq: 2, limit: 3 })).toEqual(
      before.get(treeRoot)!.slice(2, 5),
    );
    for (const id of taskIds) expect(await storage.eventStore.streamVersion(id)).toBe(before.get(id)!.length);
    // the log still holds every event (one more: the archive's record), at the same positions
    const head = await storage.eventStore.head();
    expect(head.event_count).toBe(headBefore.event_count + 1);
    expect(head.position).toBe(headBefore.position + 1);
    const [record] = await storage.eventStore.readStream(ARCHIVE_STREAM);
    expect(record).toMatchObject({
      type: 'TASKS_ARCHIVED',
      position: headBefore.position + 1,
      payload: { events: golden.rows.length, reason: 'policy' },
    });
    // readers of the global log are told where the moved events were
    const ranges = await storage.eventStore.archivedRanges(0);
    expect(ranges).toHaveLength(1);
    expect(new Set(ranges[0].task_ids)).toEqual(new Set(taskIds));
    expect(ranges[0].event_count).toBe(golden.rows.length);
    // the summary row stays: GET /tasks/:id reads it
    expect((await storage.taskStates.get(treeRoot))?.status).toBe(golden.states[treeRoot].status);
    expect(await verifyLog(storage.db, 500, segmentBytesOf(temp))).toMatchObject({
      ok: true,
      tasks: taskIds.length,
      problems: [],
    });
    // a rebuild of the projection folds the archived streams too: the summary rows come out the same
    const rows = await storage.db
      .withTables<{ tasks: { task_id: string } }>()
      .selectFrom('tasks')
      .selectAll()
      .orderBy('task_id')
      .execute();
    await storage.taskStates.rebuild();
    expect(
      await storage.db
        .withTables<{ tasks: { task_id: string } }>()
        .selectFrom('tasks')
        .selectAll()
        .orderBy('task_id')
        .execute(),
    ).toEqual(rows);
    expect(rows).toHaveLength(taskIds.length);
  });

  it('refuses appends to an archived task, and deletes of live events stay refused', async () => {
    const { storage } = temp;
    await withArchiver(temp, (a) => a.run(anHour, LATER));
    await expect(
      storage.eventStore.append(
        treeRoot,
        [{ type: 'OUTPUT_CHUNK', payload: { call_id: 'call_1', index: 0, delta: 'x' } }],
        {
          expected: 'any',
        },
      ),
    ).rejects.toMatchObject({ name: 'IllegalStateError', message: expect.stringMatching(/is archived/) });
    const log = new TaskLog('task_live', 'ses_live').received('hi');
    await storage.eventStore.append('task_live', asNew(log.events), { expected: 'no_stream' });
    await expect(
      sql`DELETE FROM events WHERE task_id = 'task_live'`.execute(storage.db),
    ).rejects.toMatchObject({ message: expect.stringMatching(/append-only/) });
    await expect(
      sql`UPDATE events SET type = type WHERE task_id = ${ARCHIVE_STREAM}`.execute(storage.db),
    ).rejects.toMatchObject({ message: expect.stringMatching(/append-only/) });
  });

  it('vacuum gives the freed pages back: the SQLite file shrinks to what stays live', async () => {
    const { storage } = temp;
    for (let i = 0; i < 6; i++) {
      const id = `task_big${i}`;
      const log = new TaskLog(id, `ses_big${i}`).received('y'.repeat(40_000)).completed();
      await storage.eventStore.append(id, asNew(log.events), { expected: 'no_stream' });
    }
    await withArchiver(temp, (a) => a.run(anHour, Date.now() + 2 * 3_600_000));
    const result = await withArchiver(temp, (a) => a.vacuum());
    if (storage.driver === 'postgres') {
      expect(result.mode).toBe('vacuum');
      return;
    }
    expect(result.mode).toBe('incremental');
    expect(result.bytes_after).toBeLessThan(result.bytes_before - 6 * 40_000);
    expect(Number((storage as SqliteStorage).raw.pragma('freelist_count', { simple: true }))).toBe(0);
  });

  it('restores a tree, or a whole segment, to the live log at its own positions', async () => {
    const { storage } = temp;
    const before = await streams(storage);
    const liveBefore = await storage.db.selectFrom('events').selectAll().orderBy('position').execute();
    const run = await withArchiver(temp, (a) => a.run(anHour, LATER));
    const child = golden.rows.find(
      (r) => r.type === 'TASK_RECEIVED' && r.task_id !== treeRoot && r.payload.includes(treeRoot),
    )!.task_id;
    const restored = await withArchiver(temp, (a) => a.restore(child));
    expect(restored.task_ids).toContain(treeRoot);
    expect(restored.task_ids).toHaveLength(4);
    expect(await liveCount(storage.db, treeRoot)).toBe(before.get(treeRoot)!.length);
    expect(await storage.eventStore.readWholeStream(treeRoot)).toEqual(before.get(treeRoot));
    await expect(withArchiver(temp, (a) => a.restore(treeRoot))).rejects.toThrow(/live log/);
    await withArchiver(temp, (a) => a.restore(run.segments[0].segment_id));
    expect(await storage.db.selectFrom('archive_segments').selectAll().execute()).toEqual([]);
    const liveAfter = await storage.db
      .selectFrom('events')
      .selectAll()
      .where('task_id', '!=', ARCHIVE_STREAM)
      .orderBy('position')
      .execute();
    expect(liveAfter).toEqual(liveBefore);
    if (storage.driver === 'sqlite')
      // no segment file left (the archive's catalog stays)
      expect(readdirSync(segmentFolder(temp.path)).filter((f) => f.includes('.jsonl.gz'))).toEqual([]);
    const records = await storage.eventStore.readStream(ARCHIVE_STREAM);
    expect(records.map((e) => e.type)).toEqual(['TASKS_ARCHIVED', 'TASKS_RESTORED', 'TASKS_RESTORED']);
    await expect(withArchiver(temp, (a) => a.restore('task_nowhere'))).rejects.toThrow(/no archived task/);
  });

  it('never moves a waiting task, a tree with a task not finished, or one in a busy session', async () => {
    const { storage } = temp;
    const waiting = new TaskLog('task_waiting', 'ses_wait')
      .received('wait for me')
      .waitUntil('2027-12-30T00:00:00.000Z');
    await storage.eventStore.append('task_waiting', asNew(waiting.events), { expected: 'no_stream' });
    const sameSession = golden.states[taskIds[0]].session_id;
    const open = new TaskLog('task_open', sameSession).received('still running');
    await storage.eventStore.append('task_open', asNew(open.events), { expected: 'no_stream' });
    const dry = await withArchiver(temp, (a) => a.run(anHour, LATER + 365 * 86_400_000, { dryRun: true }));
    expect(dry.tasks).not.toContain('task_waiting');
    expect(dry.tasks).not.toContain('task_open');
    const inSession = taskIds.filter((id) => golden.states[id].session_id === sameSession);
    for (const id of inSession) expect(dry.tasks).not.toContain(id);
    expect(dry.skipped.map((s) => s.reason).join('\n')).toMatch(/has a task not finished/);
    // a dry run moves nothing
    expect(await liveCount(storage.db, taskIds[0])).toBe(
      golden.rows.filter((r) => r.task_id === taskIds[0]).length,
    );
    const run = await withArchiver(temp, (a) => a.run(anHour, LATER + 365 * 86_400_000));
    expect(new Set(run.tasks)).toEqual(new Set(dry.tasks));
    expect(await liveCount(storage.db, 'task_waiting')).toBe(2);
  });

  it('a rule by status keeps the others live; a task that ended recently stays', async () => {
    const failedOnly = parseRetention('[{"older_than":"1h","status":["failed"]}]')!;
    const run = await withArchiver(temp, (a) => a.run(failedOnly, LATER));
    const failedRoots = taskIds.filter((id) => golden.states[id].status === 'failed');
    for (const id of failedRoots) expect(run.tasks).toContain(id);
    const tooSoon = await withArchiver(temp, (a) => a.run(parseRetention('30d')!, LATER));
    expect(tooSoon.tasks).toEqual([]);
  });

  it('a segment that does not match its checksum fails reads and verification, loudly', async () => {
    const { storage } = temp;
    const run = await withArchiver(temp, (a) => a.run(anHour, LATER));
    const id = run.segments[0].segment_id;
    if (storage.driver === 'sqlite') {
      writeFileSync(`${segmentFolder(temp.path)}/${id}.jsonl.gz`, Buffer.from('not a segment'));
      expect(existsSync(segmentFolder(temp.path))).toBe(true);
    } else {
      await sql`UPDATE archive_segments SET content = ${Buffer.from('not a segment')}`.execute(storage.db);
    }
    await expect(storage.eventStore.readStream(treeRoot)).rejects.toThrow(/sha256/);
    const report = await verifyLog(storage.db, 500, segmentBytesOf(temp));
    expect(report.ok).toBe(false);
    expect(report.problems[0].problem).toMatch(/cannot be read: .*sha256/);
  });
});
