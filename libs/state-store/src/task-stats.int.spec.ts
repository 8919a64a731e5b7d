import { migrateToLatest } from '@runledger/migrations';
import { sql } from 'kysely';
import { withArchiver } from './testing/with-archiver';
import { parseRetention } from './archive/retention-policy';
import { StateStoreTables } from './schema';
import { TaskStatsRepository } from './task-stats';
import { TaskLog } from './testing/task-events';
import { Storage } from './storage';
import { TempStorage, asNew, describeEachStorage } from './testing/temp-storage';

describeEachStorage('TaskStatsRepository', (openStorage) => {
  let tmp: TempStorage<Storage>;
  let sut: TaskStatsRepository;

  beforeEach(async () => {
    tmp = await openStorage();
    sut = new TaskStatsRepository(
      tmp.storage.db.withTables<StateStoreTables>(),
      tmp.storage.taskStates.catalog,
    );
  });
  afterEach(() => tmp.dispose());

  const append = (log: TaskLog) =>
    tmp.storage.eventStore.append(log.taskId, asNew(log.events), { expected: 'no_stream' });

  it('lists the tasks that ended since a time, with their stop reason, start and end', async () => {
    await append(new TaskLog('done').received().model('m1', 3, 4).completed());
    await append(new TaskLog('broke').received().failed());
    await append(new TaskLog('waiting').received().askPermission('r1'));
    const ended = await sut.endedTasks('2026-01-01T00:00:00.000Z');
    expect(ended).toEqual([
      {
        stop_reason: 'budget_exceeded',
        created_at: '2026-01-01T00:00:01.000Z',
        updated_at: '2026-01-01T00:00:02.000Z',
      },
      {
        stop_reason: 'completed',
        created_at: '2026-01-01T00:00:01.000Z',
        updated_at: '2026-01-01T00:00:04.000Z',
      },
    ]);
    expect(await sut.endedTasks('2026-01-01T00:00:03.000Z')).toEqual([ended[1]]);
  });

  it('sums tokens and cost of model answers per UTC day and model', async () => {
    const first = new TaskLog('a').received().model('c1', 10, 5, 0.25).model('c2', 1, 1, 0.5);
    const second = new TaskLog('b').received().model('c3', 7, 3, 1);
    const other = second.events.find((e) => e.type === 'MODEL_RESPONDED')!;
    (other.payload as { model: string }).model = 'big-model';
    for (const e of second.events) e.created_at = e.created_at.replace('2026-01-01', '2026-01-02');
    await append(first);
    await append(second);
    expect(await sut.modelUsagePerDay('2026-01-01T00:00:00.000Z')).toEqual([
      {
        day: '2026-01-01',
        model: 'm',
        model_calls: 2,
        prompt_tokens: 11,
        completion_tokens: 6,
        total_tokens: 17,
        cost_usd: 0.75,
      },
      {
        day: '2026-01-02',
        model: 'big-model',
        model_calls: 1,
        prompt_tokens: 7,
        completion_tokens: 3,
        total_tokens: 10,
        cost_usd: 1,
      },
    ]);
    expect(await sut.modelUsagePerDay('2026-01-02T00:00:00.000Z')).toHaveLength(1);
  });

  it('keeps counting model usage once the tasks are archived, and a rebuild folds the same figures from the log', async () => {
    const first = new TaskLog('a').received().model('c1', 10, 5, 0.25).completed();
    const second = new TaskLog('b').received().model('c2', 7, 3, 1).completed();
    await append(first);
    await append(second);
    const before = await sut.modelUsagePerDay('2026-01-01T00:00:00.000Z');
    expect(before).toEqual([expect.objectContaining({ model_calls: 2, total_tokens: 25, cost_usd: 1.25 })]);
    const endedBefore = await sut.endedTasks('2026-01-01T00:00:00.000Z');
    expect(endedBefore).toHaveLength(2);
    // archived, and their rows moved on into the archive's catalog
    const everything = { ...parseRetention('1h')!, catalog_after_ms: 0 };
    await withArchiver(tmp, (a) => a.run(everything, Date.now()));
    const live = await tmp.storage.db
      .selectFrom('events')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('type', '=', 'MODEL_RESPONDED')
      .executeTakeFirstOrThrow();
    expect(Number(live.n)).toBe(0);
    expect(await sut.modelUsagePerDay('2026-01-01T00:00:00.000Z')).toEqual(before);
    expect(await tmp.storage.taskStates.countByStatus()).toEqual({ completed: 2 });
    expect(await sut.endedTasks('2026-01-01T00:00:00.000Z')).toEqual(endedBefore);
    // the read model is the log's fold: a rebuild reads the archived streams from their segments
    await tmp.storage.taskStates.rebuild();
    expect(await sut.modelUsagePerDay('2026-01-01T00:00:00.000Z')).toEqual(before);
  });

  it('the migration that adds the read model fills it from the events already in the log', async () => {
    await append(new TaskLog('a').received().model('c1', 10, 5, 0.25).model('c2', 1, 1, 0.5));
    const expected = await sut.modelUsagePerDay('2026-01-01T00:00:00.000Z');
    const db = tmp.storage.db;
    await db.schema.dropTable('model_usage').execute();
    await sql`DELETE FROM kysely_migration WHERE name = '1795334683810-CreateModelUsage'`.execute(db);
    await migrateToLatest(db);
    expect(await sut.modelUsagePerDay('2026-01-01T00:00:00.000Z')).toEqual(expected);
    expect(expected).toEqual([
      expect.objectContaining({ model: 'm', model_calls: 2, prompt_tokens: 11, cost_usd: 0.75 }),
    ]);
  });
});
