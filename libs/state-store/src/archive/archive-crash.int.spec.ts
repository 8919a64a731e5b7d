import { setTimeout as sleep } from 'node:timers/promises';
import {
  ArchivedStreams,
  Database,
  postgresCatalog,
  readSegmentFile,
  segmentFile,
  segmentFolder,
  sqliteCatalog,
} from '@runledger/event-store';
import { spawnCli } from '@runledger/testing';
import { Kysely, sql } from 'kysely';
import { verifyLog } from '../log-verification';
import { Storage } from '../storage';
import { TaskLog } from '../testing/task-events';
import { TempStorage, asNew, describeEachStorage } from '../testing/temp-storage';

const TASKS = 240;

/** Finished tasks of a few events each (plus their tasks rows, kept by the append's projection). */
async function fill(storage: Storage): Promise<string[]> {
  const ids = Array.from({ length: TASKS }, (_, i) => `task_crash_${String(i).padStart(4, '0')}`);
  for (let i = 0; i < ids.length; i += 40)
    await Promise.all(
      ids.slice(i, i + 40).map((id, j) => {
        const log = new TaskLog(id, `ses_crash_${(i + j) % 17}`)
          .received(`input ${id}`)
          .context(1)
          .decided(1);
        log.completed(`answer of ${id}`);
        return storage.eventStore.append(id, asNew(log.events), { expected: 'no_stream' });
      }),
    );
  return ids;
}

/**
 * Where every event of `ids` is: live, or in a recorded segment that `archived_tasks` points its task
 * to. Throws when one is in both or in neither, or twice in either.
 */
async function whereEach(temp: TempStorage<Storage>, ids: readonly string[], eventIds: ReadonlySet<string>) {
  const db = temp.storage.db as Kysely<Database>;
  const live = await db
    .selectFrom('events')
    .select(['event_id', 'task_id'])
    .where('task_id', 'like', 'task_crash_%')
    .execute();
  const archivedTasks = await db.selectFrom('archived_tasks').selectAll().execute();
  const folder = segmentFolder(temp.path);
  const streams = new ArchivedStreams(db, async (id) =>
    temp.storage.driver === 'sqlite'
      ? readSegmentFile(segmentFile(folder, id))
      : (
          await db
            .selectFrom('archive_segments')
            .select('content')
            .where('segment_id', '=', id)
            .executeTakeFirstOrThrow()
        ).content!,
  );
  const archived: string[] = [];
  for (const t of archivedTasks) archived.push(...(await streams.stream(t.task_id)).map((e) => e.event_id));
  const all = [...live.map((e) => e.event_id), ...archived];
  expect(all.length).toBe(eventIds.size);
  expect(new Set(all)).toEqual(eventIds);
  // a task is wholly in one place
  const liveTasks = new Set(live.map((e) => e.task_id));
  for (const t of archivedTasks) expect(liveTasks.has(t.task_id)).toBe(false);
  expect(liveTasks.size + archivedTasks.length).toBe(ids.length);
  return { live: liveTasks.size, archived: archivedTasks.length };
}

describeEachStorage(
  'archiving killed with SIGKILL in the middle of a run (runledger archive child processes)',
  (open) => {
    let temp: TempStorage<Storage>;
    beforeEach(async () => {
      temp = await open();
    });
    afterEach(() => temp.dispose());

    it('loses nothing and duplicates nothing; the next run finishes the work', async () => {
      const ids = await fill(temp.storage);
      const eventIds = new Set(
        (
          await temp.storage.db
            .selectFrom('events')
            .select('event_id')
            .where('task_id', 'like', 'task_crash_%')
            .execute()
        ).map((r) => r.event_id),
      );
      expect(eventIds.size).toBe(TASKS * 4);
      const env = {
        RUNLEDGER_DB: temp.path,
        ...(temp.storage.driver === 'postgres' ? { RUNLEDGER_PG_SCHEMA: temp.dir } : {}),
        RUNLEDGER_RETENTION_BATCH: '8',
      };
      const archivedCount = async () =>
        Number(
          (
            await temp.storage.db
              .selectFrom('archived_tasks')
              .select((eb) => eb.fn.countAll<number>().as('n'))
              .executeTakeFirstOrThrow()
          ).n,
        );
      const killedAt: number[] = [];
      for (const extraMs of [0, 35, 110]) {
        const before = await archivedCount();
        const { child, done } = spawnCli(['archive', '--older-than', '1d'], { cwd: process.cwd(), env });
        // once a batch of this run committed, a little later: somewhere inside a later batch
        for (const deadline = Date.now() + 60_000; (await archivedCount()) === before;) {
          if (child.exitCode !== null || Date.now() > deadline)
            throw new Error(`archive ended first: ${(await done).stderr}`);
          await sleep(5);
        }
        await sleep(extraMs);
        child.kill('SIGKILL');
        expect((await done).signal).toBe('SIGKILL');
        const where = await whereEach(temp, ids, eventIds);
        killedAt.push(where.archived);
        expect(where.archived).toBeGreaterThan(before);
      }
      expect(killedAt[killedAt.length - 1]).toBeLessThan(TASKS);

      const finished = spawnCli(['archive', '--older-than', '1d', '--json'], { cwd: process.cwd(), env });
      const result = await finished.done;
      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
      expect(await whereEach(temp, ids, eventIds)).toEqual({ live: 0, archived: TASKS });
      const report = await verifyLog(
        temp.storage.db,
        500,
        temp.storage.driver === 'sqlite'
          ? async (id) => readSegmentFile(segmentFile(segmentFolder(temp.path), id))
          : undefined,
      );
      expect(report.problems).toEqual([]);
      // every task reads back whole through the store
      for (const id of ids.slice(0, 20)) expect(await temp.storage.eventStore.readStream(id)).toHaveLength(4);
    }, 240_000);

    it('a catalog run killed mid-batch loses nothing and duplicates nothing; the next run finishes the move', async () => {
      const ids = await fill(temp.storage);
      const env = {
        RUNLEDGER_DB: temp.path,
        ...(temp.storage.driver === 'postgres' ? { RUNLEDGER_PG_SCHEMA: temp.dir } : {}),
        RUNLEDGER_RETENTION_BATCH: '8',
      };
      const archived = await spawnCli(['archive', '--older-than', '1d'], {
        cwd: process.cwd(),
        env: { ...env, RUNLEDGER_RETENTION_CATALOG_AFTER: 'off' },
      }).done;
      expect(archived.code).toBe(0);
      const before = await readsOf(temp.storage, ids);
      expect(before.listed).toHaveLength(TASKS);
      const liveRecords = async () =>
        Number(
          (
            await temp.storage.db
              .selectFrom('archived_tasks')
              .select((eb) => eb.fn.countAll<number>().as('n'))
              .where('task_id', 'like', 'task_crash_%')
              .executeTakeFirstOrThrow()
          ).n,
        );
      // everything archived until now is due for the catalog
      const catalogEnv = { ...env, RUNLEDGER_RETENTION_CATALOG_AFTER: '0s' };
      for (const extraMs of [0, 5, 40]) {
        const left = await liveRecords();
        const { child, done } = spawnCli(['archive', '--older-than', '1d'], {
          cwd: process.cwd(),
          env: catalogEnv,
        });
        for (const deadline = Date.now() + 60_000; (await liveRecords()) === left;) {
          if (child.exitCode !== null || Date.now() > deadline)
            throw new Error(`archive ended first: ${(await done).stderr}`);
          await sleep(2);
        }
        await sleep(extraMs);
        child.kill('SIGKILL');
        expect((await done).signal).toBe('SIGKILL');
        expect(await readsOf(temp.storage, ids)).toEqual(before);
      }
      expect(await liveRecords()).toBeGreaterThan(0);

      const finished = await spawnCli(['archive', '--older-than', '1d', '--json'], {
        cwd: process.cwd(),
        env: catalogEnv,
      }).done;
      expect(finished.stderr).toBe('');
      expect(finished.code).toBe(0);
      expect(await liveRecords()).toBe(0);
      expect(await readsOf(temp.storage, ids)).toEqual(before);
      const catalog =
        temp.storage.driver === 'postgres' ? postgresCatalog(temp.storage.db) : sqliteCatalog(temp.path);
      try {
        const db = catalog.db()!;
        for (const table of ['catalog_tasks', 'catalog_archived_tasks'])
          expect(
            (
              await sql<{
                n: number;
                d: number;
              }>`SELECT count(*) AS n, count(DISTINCT task_id) AS d FROM ${sql.table(table)}`.execute(db)
            ).rows.map((r) => [Number(r.n), Number(r.d)]),
          ).toEqual([[TASKS, TASKS]]);
        const report = await verifyLog(
          temp.storage.db,
          500,
          temp.storage.driver === 'sqlite'
            ? async (id) => readSegmentFile(segmentFile(segmentFolder(temp.path), id))
            : undefined,
          undefined,
          undefined,
          db,
        );
        expect(report.problems).toEqual([]);
        expect(report.tasks).toBe(TASKS);
      } finally {
        await catalog.close();
      }
      // each record's move is in the log once
      const moved = (await temp.storage.eventStore.readStream('system:archive'))
        .filter((e) => e.type === 'TASKS_CATALOGUED')
        .reduce((n, e) => n + (e.payload as { tasks: number }).tasks, 0);
      expect(moved).toBe(TASKS);
    }, 240_000);
  },
);

/** What readers answer of the tasks: the whole list (pages of 50), counts, every row and a few streams. */
async function readsOf(storage: Storage, ids: readonly string[]) {
  const listed: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await storage.taskStates.list({ limit: 50, ...(cursor ? { cursor } : {}) });
    listed.push(...page.items.map((t) => t.task_id));
    cursor = page.next_cursor ?? undefined;
  } while (cursor);
  return {
    listed,
    counts: await storage.taskStates.countByStatus(),
    rows: (await Promise.all(ids.map((id) => storage.taskStates.get(id)))).map((t) => t && t.status),
    streams: await Promise.all(ids.slice(0, 12).map((id) => storage.eventStore.readStream(id))),
  };
}
