import BetterSqlite3 from 'better-sqlite3';
import { IdempotencyConflictError } from '@runledger/contracts';
import { StateStoreTables } from './schema';
import { TaskLog } from './testing/task-events';
import { TempStorage, asNew, createTempStorage } from './testing/temp-storage';

/** The server's storage: appends and the tasks projection on the writer thread's connection, reads on this one. */
describe('createSqliteStorage with a writer thread', () => {
  let tmp: TempStorage;

  beforeEach(async () => {
    // a rider waits long enough for the next append even on a loaded machine
    tmp = await createTempStorage({ writerThread: true, groupCommit: { rideMaxWaitMs: 1_000 } });
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

  /** t1 received; another connection holds the write lock, as another process's long transaction would; a claim of t1 issued meanwhile */
  const claimWhileLocked = async () => {
    await append(new TaskLog('t1').received('a'));
    const other = new BetterSqlite3(tmp.path);
    other.exec('BEGIN IMMEDIATE');
    const claimed = tmp.storage.leases.claim('t1', 'owner-a', { ttlMs: 20_000 });
    const unlock = () => {
      other.exec('COMMIT');
      other.close();
    };
    return { claimed, unlock };
  };

  it("sends the main connection's writes to the thread: a locked file never blocks the event loop, and the write lands once the lock is gone", async () => {
    const { claimed, unlock } = await claimWhileLocked();
    let ticks = 0;
    const ticking = setInterval(() => ticks++, 5);
    await new Promise((r) => setTimeout(r, 300));
    clearInterval(ticking);
    // run on this thread, the claim would have slept in SQLite's busy handler with the loop stopped
    expect(ticks).toBeGreaterThan(10);
    unlock();
    expect(await claimed).toMatchObject({ owner: 'owner-a' });
    expect(await tmp.storage.leases.get('t1')).toMatchObject({ owner: 'owner-a' });
    // nothing on this connection ever took the write lock
    expect(tmp.storage.raw.inTransaction).toBe(false);
  }, 60_000);

  it('refuses a kysely transaction on the main connection, whose statements would run on two connections', async () => {
    await expect(
      tmp.storage.db.transaction().execute(async (trx) => {
        await trx.deleteFrom('events').where('task_id', '=', 'none').execute();
      }),
    ).rejects.toThrow(/writer thread/);
  }, 60_000);

  it('a lazyDb write rides in the next append’s commit, or commits alone once it waited rideMaxWaitMs', async () => {
    await append(new TaskLog('t1').received('a'));
    const db = tmp.storage.db.withTables<StateStoreTables>();
    const lazyDb = tmp.storage.lazyDb.withTables<StateStoreTables>();
    const registered = () =>
      db
        .selectFrom('processes')
        .select('pid')
        .where('hostname', '=', 'rider')
        .execute()
        .then((rows) => rows.map((r) => r.pid));
    const before = tmp.storage.eventStore.commitStats();
    const rider = lazyDb
      .insertInto('processes')
      .values({ hostname: 'rider', pid: 1, started_at: new Date(0).toISOString(), command: 'test' })
      .execute();
    await new Promise((r) => setImmediate(r));
    expect(await registered()).toEqual([]);
    await append(new TaskLog('t2').received('b'));
    // the append's commit held the rider: it was written before the append resolved
    expect(await registered()).toEqual([1]);
    await rider;
    const after = tmp.storage.eventStore.commitStats();
    expect(after.commits - before.commits).toBe(1);
    expect(after.transactions - before.transactions).toBe(1);

    const alone = lazyDb
      .insertInto('processes')
      .values({ hostname: 'rider', pid: 2, started_at: new Date(0).toISOString(), command: 'test' })
      .execute();
    await alone;
    expect(await registered()).toEqual([1, 2]);
    expect(tmp.storage.eventStore.commitStats().transactions - after.transactions).toBe(1);
  }, 60_000);

  it('a read does not wait behind a routed write that waits for the lock', async () => {
    const { claimed, unlock } = await claimWhileLocked();
    await new Promise((r) => setTimeout(r, 20));
    let timer: NodeJS.Timeout | undefined;
    const read = await Promise.race([
      tmp.storage.db.selectFrom('events').select('task_id').executeTakeFirst(),
      new Promise((r) => (timer = setTimeout(() => r('timed out'), 2_000))),
    ]);
    clearTimeout(timer);
    expect(read).toMatchObject({ task_id: 't1' });
    unlock();
    await claimed;
  }, 60_000);
});
