import { openPostgres } from '@runledger/event-store';
import { describePostgres, useTestPostgres } from '@runledger/testing';
import { SqliteStorage, Storage } from '../storage';
import { TaskLog } from '../testing/task-events';
import {
  TempStorage,
  asNew,
  createTempPgStorage,
  createTempStorage,
  describeEachStorage,
} from '../testing/temp-storage';
import { ARCHIVE_STREAM, ArchiveRun, ArchiveRunner, Archiver } from './archiver';
import { ThreadArchiver } from './thread-archiver';
import { ArchiveAccess, openSqliteArchiver, postgresArchiver } from './open-archiver';
import { parseRetention } from './retention-policy';
import { RetentionSweeper } from './retention-sweeper';

const anHour = parseRetention('1h')!;
/** two hours on: every task appended now ended more than an hour before */
const later = () => Date.now() + 2 * 3_600_000;
const quiet = { info: () => undefined, error: (f: Record<string, unknown>) => console.error(f) };

async function finishedTasks(storage: Storage, prefix: string, n: number, padding = 0): Promise<string[]> {
  const ids = Array.from({ length: n }, (_, i) => `task_${prefix}${i}`);
  for (const id of ids) {
    const log = new TaskLog(id, `ses_${id}`)
      .received(`input of ${id} ${'x'.repeat(padding)}`)
      .completed(`answer of ${id}`);
    await storage.eventStore.append(id, asNew(log.events), { expected: 'no_stream' });
  }
  return ids;
}

async function archivedIds(storage: Storage): Promise<string[]> {
  const records = await storage.eventStore.readWholeStream(ARCHIVE_STREAM);
  return records.flatMap((e) => (e.type === 'TASKS_ARCHIVED' ? e.payload.task_ids : []));
}

async function until(check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  for (const deadline = Date.now() + ms; !(await check());) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

type Where = 'here' | 'thread';

function archiverOn(
  temp: TempStorage<Storage>,
  batchTasks: number,
  where: Where,
): { archiver: ArchiveRunner; close(): Promise<void> } {
  if (temp.storage.driver === 'postgres')
    return { archiver: postgresArchiver(temp.storage.db, { batchTasks }), close: async () => undefined };
  if (where === 'thread') {
    const thread = new ThreadArchiver({ path: temp.path, batchTasks, companionPrefixes: [] });
    return { archiver: thread, close: () => thread.close() };
  }
  const access: ArchiveAccess = openSqliteArchiver(temp.path, { batchTasks });
  return access;
}

const sweeperSpecs = (open: () => Promise<TempStorage<Storage>>, where: Where) => {
  let temp: TempStorage<Storage>;
  let access: { archiver: ArchiveRunner; close(): Promise<void> };
  let sweeper: RetentionSweeper | null = null;
  beforeEach(async () => {
    temp = await open();
    access = archiverOn(temp, 3, where);
  });
  afterEach(async () => {
    await sweeper?.stop();
    sweeper = null;
    await access.close();
    await temp.dispose();
  });

  it('archives what the policy lets go on its interval, in bounded batches; waiting tasks stay; stop ends it', async () => {
    const { storage } = temp;
    const ids = await finishedTasks(storage, 'done', 8, 30_000);
    const waiting = new TaskLog('task_timer', 'ses_timer')
      .received('wait for me')
      .waitUntil('2027-12-30T00:00:00.000Z');
    await storage.eventStore.append('task_timer', asNew(waiting.events), { expected: 'no_stream' });
    const asking = new TaskLog('task_asking', 'ses_asking').received('may I').askPermission('req_1');
    await storage.eventStore.append('task_asking', asNew(asking.events), { expected: 'no_stream' });

    sweeper = new RetentionSweeper(access.archiver, {
      policy: anHour,
      intervalMs: 20,
      restMs: 5,
      now: later,
      log: quiet,
    });
    const pages = async () =>
      temp.storage.driver === 'sqlite'
        ? Number((temp.storage as SqliteStorage).raw.pragma('page_count', { simple: true }))
        : 0;
    const pagesBefore = await pages();
    sweeper.start();
    await until(async () => (await archivedIds(storage)).length === ids.length);
    const records = (await storage.eventStore.readWholeStream(ARCHIVE_STREAM)).filter(
      (e) => e.type === 'TASKS_ARCHIVED',
    );
    // 8 tasks, 3 per batch: three batches, each its own recorded segment
    expect(records.map((r) => (r.type === 'TASKS_ARCHIVED' ? r.payload.task_ids.length : 0))).toEqual([
      3, 3, 2,
    ]);
    expect((await archivedIds(storage)).sort()).toEqual([...ids].sort());
    // archived tasks read as before; the waiting ones never moved
    expect((await storage.eventStore.readWholeStream(ids[0])).map((e) => e.type)).toEqual([
      'TASK_RECEIVED',
      'TASK_COMPLETED',
    ]);
    for (const id of ['task_timer', 'task_asking']) {
      const live = await storage.db
        .selectFrom('events')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('task_id', '=', id)
        .executeTakeFirstOrThrow();
      expect(Number(live.n)).toBe(2);
    }

    // SQLite: the pages the moved events held go back to the file (incremental vacuum after the sweep)
    if (temp.storage.driver === 'sqlite') {
      const raw = (temp.storage as SqliteStorage).raw;
      await until(async () => Number(raw.pragma('freelist_count', { simple: true })) === 0);
      expect(await pages()).toBeLessThan(pagesBefore - 8 * 5);
    }
    await sweeper.stop();
    const [late] = await finishedTasks(storage, 'late', 1);
    await new Promise((r) => setTimeout(r, 150));
    expect(await archivedIds(storage)).not.toContain(late);
  });

  it('moves archived tasks’ records on into the catalog in bounded batches; every task still reads', async () => {
    const { storage } = temp;
    const ids = await finishedTasks(storage, 'cat', 8);
    sweeper = new RetentionSweeper(access.archiver, {
      policy: { ...anHour, catalog_after_ms: 0 },
      intervalMs: 60_000,
      restMs: 5,
      now: later,
      log: quiet,
    });
    const run = await sweeper.sweep();
    expect(run.catalogued.tasks).toBe(8);
    const records = (await storage.eventStore.readWholeStream(ARCHIVE_STREAM)).flatMap((e) =>
      e.type === 'TASKS_CATALOGUED' ? [e.payload.tasks] : [],
    );
    expect(records).toEqual([3, 3, 2]);
    const live = await storage.db
      .withTables<{ tasks: { task_id: string } }>()
      .selectFrom('tasks')
      .select('task_id')
      .where('task_id', 'in', ids)
      .execute();
    expect(live).toEqual([]);
    for (const id of ids) expect((await storage.taskStates.get(id))?.status).toBe('completed');
    expect((await storage.taskStates.list({ limit: 50 })).items.map((t) => t.task_id).sort()).toEqual(
      [...ids].sort(),
    );
  });

  it('stop() during a sweep ends it after the batch in flight: moved trees are whole, the rest stay live', async () => {
    const { storage } = temp;
    await access.close();
    access = archiverOn(temp, 1, where);
    const ids = await finishedTasks(storage, 'slow', 5);
    sweeper = new RetentionSweeper(access.archiver, {
      policy: anHour,
      intervalMs: 60_000,
      restMs: 60_000,
      now: later,
      log: quiet,
    });
    const run: Promise<ArchiveRun> = sweeper.sweep();
    await until(async () => (await archivedIds(storage)).length === 1);
    const stopping = Date.now();
    await sweeper.stop();
    expect(Date.now() - stopping).toBeLessThan(2_000);
    const result = await run;
    expect(result.segments).toHaveLength(1);
    expect(result.tasks).toEqual(await archivedIds(storage));
    const liveIds = ids.filter((id) => !result.tasks.includes(id));
    expect(liveIds).toHaveLength(4);
    for (const id of ids) expect(await storage.eventStore.readWholeStream(id)).toHaveLength(2);
  });
};

describeEachStorage('RetentionSweeper', (open) => sweeperSpecs(open, 'here'));
describe('RetentionSweeper with the archive thread, on SQLite', () => {
  sweeperSpecs(() => createTempStorage(), 'thread');

  it('moves batches without holding the event loop: timers fire meanwhile, as they cannot with the archiver on this thread', async () => {
    const temp = await createTempStorage();
    try {
      await finishedTasks(temp.storage, 'loop', 60, 2_000);
      const ticksWhile = async (where: Where) => {
        const { archiver, close } = archiverOn(temp, 5, where);
        let ticks = 0;
        const timer = setInterval(() => ticks++, 1);
        try {
          const run = await archiver.run(anHour, later(), { maxBatches: 6 });
          expect(run.tasks).toHaveLength(30);
          return ticks;
        } finally {
          clearInterval(timer);
          await close();
        }
      };
      // a run of six batches on this thread is one stretch of synchronous work: no timer turn in it
      expect(await ticksWhile('here')).toBe(0);
      expect(await ticksWhile('thread')).toBeGreaterThan(5);
      expect((await archivedIds(temp.storage)).length).toBe(60);
    } finally {
      await temp.dispose();
    }
  });
});

describePostgres('RetentionSweeper on two PostgreSQL instances', () => {
  const pg = useTestPostgres();

  it('of two instances sweeping one database, one archives each tree, exactly once', async () => {
    const temp = await createTempPgStorage(pg);
    const other = openPostgres({ url: temp.path, schema: temp.dir, maxConnections: 3 });
    try {
      const ids = await finishedTasks(temp.storage, 'pair', 12);
      const sweepers = [temp.storage.db, other.db].map(
        (db) =>
          new RetentionSweeper(postgresArchiver(db, { batchTasks: 2 }), {
            policy: anHour,
            intervalMs: 60_000,
            restMs: 2,
            now: later,
            log: quiet,
          }),
      );
      const runs: ArchiveRun[] = [];
      for (let round = 0; round < 3; round++)
        runs.push(...(await Promise.all(sweepers.map((s) => s.sweep()))));
      const moved = await archivedIds(temp.storage);
      expect([...moved].sort()).toEqual([...ids].sort());
      expect(new Set(moved).size).toBe(moved.length);
      expect(runs.flatMap((r) => r.tasks).sort()).toEqual([...ids].sort());
      expect(runs.some((r) => r.busy)).toBe(true);
      await Promise.all(sweepers.map((s) => s.stop()));

      // without the lease too: two instances racing on the same planned trees, one moves them
      const raced = await finishedTasks(temp.storage, 'race', 4);
      const [a, b] = [temp.storage.db, other.db].map((db) => postgresArchiver(db, { batchTasks: 10 }));
      const plan = await a.plan(temp.storage.db as never, anHour, later());
      expect(plan.trees.map((t) => t.root_task_id).sort()).toEqual([...raced].sort());
      const segments = await Promise.all(
        [
          [a, temp.storage.db],
          [b, other.db],
        ].map(([archiver, db]) =>
          (db as typeof other.db)
            .connection()
            .execute((conn) => (archiver as Archiver).archiveTrees(conn as never, plan.trees, 'policy')),
        ),
      );
      expect(segments.filter((s) => s !== null)).toHaveLength(1);
      const all = await archivedIds(temp.storage);
      expect(all.filter((id) => raced.includes(id)).sort()).toEqual([...raced].sort());
      expect(new Set(all).size).toBe(all.length);
    } finally {
      await other.close();
      await temp.dispose();
    }
  });
});
