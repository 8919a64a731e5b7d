import { IdempotencyConflictError } from '@runledger/contracts';
import { TaskLog } from './testing/task-events';
import { TempStorage, asNew, createTempStorage } from './testing/temp-storage';

/** The server's storage: appends and the tasks projection on the writer thread's connection, reads on this one. */
describe('createSqliteStorage with a writer thread', () => {
  let tmp: TempStorage;

  beforeEach(async () => {
    tmp = await createTempStorage({ writerThread: true });
  });
  afterEach(() => tmp.dispose());

  const append = (log: TaskLog) =>
    tmp.storage.eventStore.append(log.taskId, asNew(log.events), { expected: 'no_stream' });

  it('projects task states in the append transaction, refuses a reused idempotency key, and rebuilds to the same rows', async () => {
    await append(new TaskLog('t1').received('a', { idempotency_key: 'k1', request_hash: 'h1' }).completed());
    await expect(
      append(new TaskLog('t2').received('b', { idempotency_key: 'k1', request_hash: 'h2' })),
    ).rejects.toBeInstanceOf(IdempotencyConflictError);
    const sut = tmp.storage.taskStates;
    expect(await sut.get('t1')).toMatchObject({ status: 'completed', idempotency_key: 'k1' });
    expect(await sut.get('t2')).toBeNull();
    expect(await tmp.storage.eventStore.streamVersion('t2')).toBe(0);
    const report = await sut.rebuildReport();
    expect(report).toEqual({ events: 2, tasks: 1, changed: [] });
  }, 60_000);
});
