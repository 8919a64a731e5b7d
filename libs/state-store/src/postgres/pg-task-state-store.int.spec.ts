import { IdempotencyConflictError } from '@runledger/contracts';
import { describePostgres, useTestPostgres } from '@runledger/testing';
import { PostgresStorage } from '../storage';
import { TaskLog } from '../testing/task-events';
import { TempStorage, asNew, createTempPgStorage } from '../testing/temp-storage';

describePostgres('PgTaskStateStore in a group commit', () => {
  const pg = useTestPostgres();
  let tmp: TempStorage<PostgresStorage>;

  beforeEach(async () => {
    tmp = await createTempPgStorage(pg);
  });
  afterEach(() => tmp.dispose());

  const submit = (taskId: string, key: string | null) =>
    tmp.storage.eventStore.append(
      taskId,
      asNew(new TaskLog(taskId).received('x', { idempotency_key: key, request_hash: key && 'h' }).events),
      { expected: 'no_stream' },
    );

  it('of appends arriving together, only the one whose idempotency key is taken fails, writing nothing', async () => {
    const results = await Promise.allSettled([submit('t1', 'k1'), submit('t2', 'k1'), submit('t3', null)]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((results[1] as PromiseRejectedResult).reason).toBeInstanceOf(IdempotencyConflictError);
    expect(await tmp.storage.eventStore.streamVersion('t2')).toBe(0);
    expect((await tmp.storage.taskStates.list()).items.map((t) => t.task_id).sort()).toEqual(['t1', 't3']);
  });

  it('folds several appends to one task in one group onto one row', async () => {
    const log = new TaskLog('t1').received().context(1).decided(1);
    const events = asNew(log.events);
    await Promise.all([
      tmp.storage.eventStore.append('t1', events.slice(0, 1), { expected: 'no_stream' }),
      tmp.storage.eventStore.append('t1', events.slice(1, 2), { expected: 1 }),
      tmp.storage.eventStore.append('t1', events.slice(2), { expected: 2 }),
    ]);
    expect(await tmp.storage.taskStates.get('t1')).toMatchObject({ last_seq: 3, rounds: 1 });
    expect(await tmp.storage.taskStates.rebuildReport()).toEqual({ events: 3, tasks: 1, changed: [] });
  });
});
