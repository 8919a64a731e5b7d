import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { ConcurrencyError, LeaseLostError, NewEvent } from '@runledger/contracts';
import { outputChunk, taskReceived } from '../testing/events';
import { watchLoop } from '../testing/loop-watch';
import { TempSqlite, createTempSqlite } from '../testing/sqlite';
import { openSqlite } from './open-sqlite';
import { SqliteEventStore, StoreBusyError } from './sqlite-event-store';

/** The writer thread: typed errors across the boundary, projections built there, and a main thread that never waits on a lock. */
describe('SqliteEventStore with a writer thread', () => {
  let db: TempSqlite;

  beforeEach(async () => {
    db = await createTempSqlite();
  });
  afterEach(() => db.dispose());

  it('builds its projections in the thread; a projection failure and typed errors reach only their callers', async () => {
    db.handle.raw.exec('CREATE TABLE projected (position INTEGER NOT NULL)');
    const sut = new SqliteEventStore(db.handle, {
      writerThread: {
        projections: [
          {
            module: join(__dirname, '..', 'testing', 'picky-projection.ts'),
            exportName: 'createPickyProjection',
          },
        ],
      },
    });
    try {
      await sut.append('t1', [taskReceived()], { expected: 'no_stream' });
      db.handle.raw
        .prepare(`INSERT INTO task_leases (task_id, owner, epoch, expires_at) VALUES ('t1', 'b', 2, 0)`)
        .run();
      const settled = await Promise.allSettled([
        sut.append('bad', [taskReceived()], { expected: 'no_stream' }),
        sut.append('t1', [outputChunk(0)], { expected: 0 }),
        sut.append('t1', [outputChunk(0)], { expected: 1, lease: { owner: 'a', epoch: 1 } }),
        sut.append('good', [taskReceived()], { expected: 'no_stream' }),
      ]);
      expect(settled.map((s) => s.status)).toEqual(['rejected', 'rejected', 'rejected', 'fulfilled']);
      const [projection, concurrency, lease] = settled.map(
        (s) => (s as PromiseRejectedResult).reason as Error,
      );
      expect(projection.message).toBe('projection refused task bad');
      expect(concurrency).toBeInstanceOf(ConcurrencyError);
      expect(concurrency).toMatchObject({ streamId: 't1', expected: 0, actual: 1 });
      expect(lease).toBeInstanceOf(LeaseLostError);
      expect(lease).toMatchObject({ held: { owner: 'a', epoch: 1 }, current: { owner: 'b', epoch: 2 } });
      expect(db.handle.raw.prepare('SELECT position FROM projected ORDER BY position').all()).toEqual([
        { position: 1 },
        { position: 2 },
      ]);
      expect(sut.commitStats()).toEqual({ transactions: 2, commits: 2, appends: 2, events: 2 });
    } finally {
      await sut.close();
    }
  }, 60_000);

  it('the event loop keeps running while the writer waits out a lock, and StoreBusyError crosses the thread', async () => {
    const other = new BetterSqlite3(db.path);
    const handle = openSqlite({ path: db.path, busyTimeoutMs: 400 });
    const sut = new SqliteEventStore(handle, { writerThread: {}, busyRetryMs: 600 });
    try {
      // the thread is up and has written once before the lock is taken
      await sut.append('warm', [taskReceived()], { expected: 'no_stream' });
      other.exec('BEGIN IMMEDIATE');
      const watch = watchLoop();
      const outcome = await sut
        .append('t1', [taskReceived()], { expected: 'no_stream' })
        .catch((e: unknown) => e);
      const { ticks, worstGapMs } = watch.stop();
      other.exec('ROLLBACK');
      expect(outcome).toBeInstanceOf(StoreBusyError);
      // on the main thread the same wait would have held the loop for the whole busy timeout and retry window
      expect(ticks).toBeGreaterThan(10);
      expect(worstGapMs).toBeLessThan(300);
    } finally {
      other.close();
      await sut.close();
      await handle.close();
    }
  }, 60_000);

  it('copies the WAL into the database file once idle, not in a later commit', async () => {
    const sut = new SqliteEventStore(db.handle, { writerThread: {} });
    try {
      const marker = `idle-checkpoint-${Date.now()}`;
      await sut.append(
        't1',
        [taskReceived({ payload: { input: marker, session_id: 's' } } as Partial<NewEvent>)],
        {
          expected: 'no_stream',
        },
      );
      // one small append is far below SQLite's own checkpoint (1,000 pages): only the idle pass copies it
      const inFile = () => readFileSync(db.path).includes(marker);
      const deadline = Date.now() + 5_000;
      while (!inFile() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(inFile()).toBe(true);
    } finally {
      await sut.close();
    }
  }, 60_000);

  it('refuses a :memory: database and inline projection objects; appends after close are refused', async () => {
    const memory = openSqlite({ path: ':memory:' });
    expect(() => new SqliteEventStore(memory, { writerThread: {} })).toThrow(/needs a database file/);
    await memory.close();
    expect(
      () =>
        new SqliteEventStore(db.handle, {
          writerThread: {},
          projections: [{ name: 'x', apply: () => undefined, reset: () => undefined }],
        }),
    ).toThrow(/projections are given as modules/);
    const sut = new SqliteEventStore(db.handle, { writerThread: {} });
    await expect(sut.ready()).resolves.toBeUndefined();
    await sut.append('t1', [taskReceived()], { expected: 'no_stream' });
    await sut.close();
    await expect(sut.append('t1', [outputChunk(0)], { expected: 1 })).rejects.toThrow(/writer thread exited/);

    // a projection the thread cannot build fails the appends, never writes without it
    const missing = new SqliteEventStore(db.handle, {
      writerThread: {
        projections: [{ module: join(__dirname, '..', 'testing', 'events.ts'), exportName: 'noSuchFactory' }],
      },
    });
    await expect(missing.ready()).rejects.toThrow(/has no function export noSuchFactory/);
    await expect(missing.append('t2', [taskReceived()], { expected: 'no_stream' })).rejects.toThrow(
      /has no function export noSuchFactory/,
    );
    await missing.close();
    expect(await sut.streamVersion('t2')).toBe(0);
  }, 60_000);
});
