import { ConcurrencyError, ERASED_VALUE, IllegalStateError, RuntimeEvent } from '@runledger/contracts';
import {
  CatalogDatabase,
  Database,
  catalogFile,
  postgresCatalog,
  readSegmentFile,
  segmentFile,
  segmentFolder,
  sqliteCatalog,
} from '@runledger/event-store';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect, sql } from 'kysely';
import { verifyLog } from '../log-verification';
import { Storage, createPostgresStorage, createSqliteStorage } from '../storage';
import { TaskLog } from '../testing/task-events';
import { TempStorage, asNew, describeEachStorage } from '../testing/temp-storage';
import { ARCHIVE_STREAM, Archiver } from './archiver';
import { withArchiver as withArchiverOf } from '../testing/with-archiver';
import { RetentionPolicy } from './retention-policy';

const HOUR = 3_600_000;
/** the tasks below ended in January 2026; archived at T1, catalogued a day later */
const T1 = Date.parse('2026-03-01T00:00:00Z');
const T2 = T1 + 24 * HOUR;
const archiveOnly: RetentionPolicy = { rules: [{ older_than_ms: HOUR }] };
const withCatalog: RetentionPolicy = { rules: [{ older_than_ms: HOUR }], catalog_after_ms: 12 * HOUR };
const SESSIONS = ['ses_a', 'ses_b', 'ses_c'];

/** 12 finished tasks in 3 sessions, created a minute apart, a third of them failed. */
async function fill(storage: Storage, count = 12, prefix = 'task_cat'): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const id = `${prefix}_${String(i).padStart(3, '0')}`;
    const log = new TaskLog(id, SESSIONS[i % 3])
      .received(`input ${i % 2 ? 'deploy' : 'report'} ${id}`)
      .context(1);
    if (i % 3 === 2) log.failed();
    else log.decided(1).completed(`answer of ${id}`);
    const shifted = log.events.map((e) => ({
      ...e,
      created_at: new Date(Date.parse(e.created_at) + i * 60_000).toISOString(),
    })) as RuntimeEvent[];
    await storage.eventStore.append(id, asNew(shifted), { expected: 'no_stream' });
    ids.push(id);
  }
  return ids;
}

/** an archiver working in batches of 5 tasks, so one run spans several */
const withArchiver = <T>(temp: TempStorage<Storage>, body: (a: Archiver) => Promise<T>): Promise<T> =>
  withArchiverOf(temp, body, { batchTasks: 5 });

/** The catalog's tables on their own (SQLite: the catalog file; PostgreSQL: the same schema). */
async function withCatalogDb<T>(
  temp: TempStorage<Storage>,
  body: (db: Kysely<CatalogDatabase & { catalog_tasks: { task_id: string } }>) => Promise<T>,
): Promise<T> {
  if (temp.storage.driver === 'postgres') return body(temp.storage.db as never);
  const db = new Kysely<never>({
    dialect: new SqliteDialect({ database: new BetterSqlite3(catalogFile(temp.path)) }),
  });
  try {
    return await body(db as never);
  } finally {
    await db.destroy();
  }
}

const countOf = async (db: Kysely<never>, table: string, ids: readonly string[]) =>
  Number(
    (
      await sql<{
        n: number;
      }>`SELECT count(*) AS n FROM ${sql.table(table)} WHERE task_id IN (${sql.join(ids)})`.execute(db)
    ).rows[0].n,
  );

/** Everything a reader can ask of the tasks: rows, lists page by page with each filter, counts, streams. */
async function everyRead(storage: Storage, ids: readonly string[]) {
  const pages = async (query: { status?: 'completed' | 'failed'; session_id?: string; q?: string }) => {
    const out: string[][] = [];
    let cursor: string | undefined;
    do {
      const page = await storage.taskStates.list({ ...query, limit: 3, ...(cursor ? { cursor } : {}) });
      out.push(page.items.map((t) => t.task_id));
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
    return out;
  };
  const all = await storage.eventStore.readAll({ archived: true });
  return {
    rows: await Promise.all(ids.map((id) => storage.taskStates.get(id))),
    all: await pages({}),
    failed: await pages({ status: 'failed' }),
    session: await pages({ session_id: 'ses_b' }),
    q: await pages({ q: 'DEPLOY' }),
    counts: await storage.taskStates.countByStatus(),
    streams: await Promise.all(ids.map((id) => storage.eventStore.readStream(id))),
    versions: await Promise.all(ids.map((id) => storage.eventStore.streamVersion(id))),
    log: all.filter((e) => e.task_id !== ARCHIVE_STREAM).map((e) => e.event_id),
    typed: (await storage.eventStore.readAll({ archived: true, types: ['TASK_FAILED'], limit: 2 })).map(
      (e) => e.event_id,
    ),
  };
}

/** A second storage on the temp storage's database, as another process would open it. */
const openAgain = (temp: TempStorage<Storage>): Promise<Storage> =>
  temp.storage.driver === 'postgres'
    ? createPostgresStorage({ url: temp.path, schema: temp.dir, maxConnections: 2 })
    : createSqliteStorage({ path: temp.path, synchronous: 'NORMAL' });

const segmentBytesOf = (temp: TempStorage<Storage>) =>
  temp.storage.driver === 'sqlite'
    ? async (id: string) => readSegmentFile(segmentFile(segmentFolder(temp.path), id))
    : undefined;

describeEachStorage('the archive catalog (the second tier of retention)', (open) => {
  let temp: TempStorage<Storage>;
  beforeEach(async () => {
    temp = await open();
  });
  afterEach(() => temp.dispose());

  it('moves archived tasks’ records out of the live tables; every reader answers as before', async () => {
    const { storage } = temp;
    const ids = await fill(storage);
    const before = await everyRead(storage, ids);
    expect(before.all.flat()).toEqual([...ids].reverse());
    expect(before.counts).toEqual({ completed: 8, failed: 4 });

    const archived = await withArchiver(temp, (a) => a.run(archiveOnly, T1));
    expect(archived.tasks).toHaveLength(12);
    expect(archived.catalogued.tasks).toBe(0);
    // archived an hour ago only: not yet due for the catalog
    expect((await withArchiver(temp, (a) => a.run(withCatalog, T1 + HOUR))).catalogued.tasks).toBe(0);
    const dry = await withArchiver(temp, (a) => a.run(withCatalog, T2, { dryRun: true }));
    expect(dry.catalogued.tasks).toBe(12);
    const run = await withArchiver(temp, (a) => a.run(withCatalog, T2));
    expect(run.catalogued.tasks).toBe(12);

    const db = storage.db as unknown as Kysely<never>;
    expect(await countOf(db, 'tasks', ids)).toBe(0);
    expect(await countOf(db, 'archived_tasks', ids)).toBe(0);
    await withCatalogDb(temp, async (catalog) => {
      expect(await countOf(catalog as never, 'catalog_tasks', ids)).toBe(12);
      expect(await countOf(catalog as never, 'catalog_archived_tasks', ids)).toBe(12);
    });
    const records = (await storage.eventStore.readStream(ARCHIVE_STREAM)).filter(
      (e) => e.type === 'TASKS_CATALOGUED',
    );
    // batches of 5
    expect(records.map((e) => (e.payload as { tasks: number }).tasks)).toEqual([5, 5, 2]);

    expect(await everyRead(storage, ids)).toEqual(before);
    const catalog = storage.driver === 'postgres' ? postgresCatalog(storage.db) : sqliteCatalog(temp.path);
    try {
      const report = await verifyLog(
        storage.db,
        500,
        segmentBytesOf(temp),
        undefined,
        undefined,
        catalog.db(),
      );
      expect(report.problems).toEqual([]);
      expect(report.tasks).toBe(12);
    } finally {
      await catalog.close();
    }
  });

  it('refuses appends to a catalogued task and writes nothing', async () => {
    const { storage } = temp;
    const [id] = await fill(storage, 2);
    await withArchiver(temp, (a) => a.run(archiveOnly, T1));
    await withArchiver(temp, (a) => a.run(withCatalog, T2));
    const event = asNew(new TaskLog(id, 'ses_a').received('again').events);
    for (const expected of ['no_stream', 'any'] as const)
      await expect(storage.eventStore.append(id, event, { expected })).rejects.toThrow(IllegalStateError);
    await expect(storage.eventStore.append(id, event, { expected: 'no_stream' })).rejects.toThrow(/archived/);
    expect(await countOf(storage.db as never, 'events', [id])).toBe(0);
    expect(await storage.eventStore.streamVersion(id)).toBe(4);
  });

  it('refuses appends to a catalogued task from a store that remembers the head it wrote, and writes nothing', async () => {
    const { storage } = temp;
    // one task for each kind of append, so each goes from the head this store remembers
    const ids = ['task_cat_expected', 'task_cat_any'];
    const logs = ids.map((id) =>
      new TaskLog(id, 'ses_a').received('input report').context(1).decided(1).completed('answer'),
    );
    const open = logs[0].events.length - 1;
    // this store writes the open part and remembers the stream's head; another instance ends the task
    for (const log of logs)
      await storage.eventStore.append(log.taskId, asNew(log.events.slice(0, open)), {
        expected: 'no_stream',
      });
    const other = await openAgain(temp);
    try {
      for (const log of logs)
        await other.eventStore.append(log.taskId, asNew(log.events.slice(open)), { expected: open });
    } finally {
      await other.close();
    }
    expect((await withArchiver(temp, (a) => a.run(archiveOnly, T1))).tasks.sort()).toEqual([...ids].sort());
    expect((await withArchiver(temp, (a) => a.run(withCatalog, T2))).catalogued.tasks).toBe(2);
    const headBefore = await storage.eventStore.head();

    const again = (i: number) => asNew([logs[i].events[1]]);
    // on the head this store remembers, only the guard's head check sees the stream gone from the live
    // table (the trigger refuses sequence 1 only); PostgreSQL's reads then find an empty stream
    await expect(storage.eventStore.append(ids[0], again(0), { expected: open })).rejects.toThrow(
      storage.driver === 'postgres' ? ConcurrencyError : IllegalStateError,
    );
    await expect(storage.eventStore.append(ids[1], again(1), { expected: 'any' })).rejects.toThrow(
      /archived/,
    );
    expect(await countOf(storage.db as never, 'events', ids)).toBe(0);
    expect(await storage.eventStore.head()).toEqual(headBefore);
    for (const id of ids) expect(await storage.eventStore.streamVersion(id)).toBe(open + 1);
  });

  it('restores a catalogued task with both its records; rebuild leaves catalogued tasks out of the live table', async () => {
    const { storage } = temp;
    const ids = await fill(storage);
    const before = await everyRead(storage, ids);
    await withArchiver(temp, (a) => a.run(archiveOnly, T1));
    await withArchiver(temp, (a) => a.run(withCatalog, T2));
    const restored = await withArchiver(temp, (a) => a.restore(ids[4]));
    expect(restored.task_ids).toEqual([ids[4]]);
    const db = storage.db as unknown as Kysely<never>;
    expect(await countOf(db, 'tasks', [ids[4]])).toBe(1);
    expect(await countOf(db, 'events', [ids[4]])).toBe(4);
    await withCatalogDb(temp, async (catalog) => {
      expect(await countOf(catalog as never, 'catalog_tasks', [ids[4]])).toBe(0);
      expect(await countOf(catalog as never, 'catalog_archived_tasks', ids)).toBe(11);
    });
    // the other tasks of its segment still read from it
    expect(await everyRead(storage, ids)).toEqual(before);

    const rebuilt = await storage.taskStates.rebuildReport();
    expect(rebuilt.changed).toEqual([]);
    expect(rebuilt.tasks).toBe(1);
    expect(await everyRead(storage, ids)).toEqual(before);
  });

  it('a move stopped between its copy and its delete: readers see each task once, and the next run finishes it', async () => {
    const { storage } = temp;
    const ids = await fill(storage);
    const before = await everyRead(storage, ids);
    await withArchiver(temp, (a) => a.run(archiveOnly, T1));
    // the copy step of a move whose delete never ran (the process was killed between the two)
    const half = ids.slice(0, 7);
    const liveRows = {
      tasks: await (storage.db as unknown as Kysely<never>)
        .selectFrom('tasks' as never)
        .selectAll()
        .where('task_id' as never, 'in', half as never)
        .execute(),
      archived: await (storage.db as Kysely<Database>)
        .selectFrom('archived_tasks')
        .selectAll()
        .where('task_id', 'in', half)
        .execute(),
    };
    expect(liveRows.tasks).toHaveLength(7);
    await withArchiver(temp, async () => undefined);
    await withCatalogDb(temp, async (catalog) => {
      await catalog
        .insertInto('catalog_tasks')
        .values(liveRows.tasks as never)
        .execute();
      await catalog.insertInto('catalog_archived_tasks').values(liveRows.archived).execute();
    });
    expect(await everyRead(storage, ids)).toEqual(before);

    const run = await withArchiver(temp, (a) => a.run(withCatalog, T2));
    expect(run.catalogued.tasks).toBe(12);
    await withCatalogDb(temp, async (catalog) => {
      expect(await countOf(catalog as never, 'catalog_tasks', ids)).toBe(12);
      expect(await countOf(catalog as never, 'catalog_archived_tasks', ids)).toBe(12);
    });
    expect(await countOf(storage.db as never, 'tasks', ids)).toBe(0);
    expect(await everyRead(storage, ids)).toEqual(before);
  });

  it('an erasure finds the session’s catalogued tasks and scrubs their summaries in the catalog', async () => {
    const { storage } = temp;
    const ids = await fill(storage);
    await withArchiver(temp, (a) => a.run(archiveOnly, T1));
    await withArchiver(temp, (a) => a.run(withCatalog, T2));
    const sessionB = ids.filter((_, i) => i % 3 === 1);
    expect((await storage.taskStates.get(sessionB[0]))!.input).toContain('input');
    let events = 0;
    for (const id of sessionB) events += (await storage.eventStore.readStream(id)).length;
    const report = await storage.erasure.erase('ses_b');
    expect(report.task_ids).toEqual(sessionB);
    // every event of the session is in the archive's segments, none live
    expect([report.archived_events, report.sealed_events, report.clear_events]).toEqual([events, 0, 0]);
    for (const id of sessionB) expect((await storage.taskStates.get(id))!.input).toBe(ERASED_VALUE);
    await withCatalogDb(temp, async (catalog) => {
      const rows = await catalog
        .selectFrom('catalog_tasks' as never)
        .select(['task_id' as never, 'input' as never])
        .execute();
      const inputs = new Map((rows as { task_id: string; input: string }[]).map((r) => [r.task_id, r.input]));
      for (const id of sessionB) expect(inputs.get(id)).toBe(ERASED_VALUE);
      expect(inputs.get(ids[0])).toContain('input');
    });
  });
});
