import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { NewEvent } from '@runledger/contracts';
import { outputChunk, taskReceived } from '../testing/events';
import { watchLoop } from '../testing/loop-watch';
import { TempSqlite, createTempSqlite } from '../testing/sqlite';
import { openSqlite } from './open-sqlite';
import { SqliteEventStore } from './sqlite-event-store';

const PROJECTION = {
  module: join(__dirname, '..', 'testing', 'picky-projection.ts'),
  exportName: 'createPickyProjection',
};

/** AdaptiveAppendWriter: a lone appender commits inline, concurrent ones on the thread, a locked file on the thread. */
describe('SqliteEventStore, writer thread while concurrent', () => {
  let db: TempSqlite;

  beforeEach(async () => {
    db = await createTempSqlite();
    db.handle.raw.exec('CREATE TABLE projected (position INTEGER NOT NULL)');
    db.handle.raw.exec('CREATE TABLE notes (note TEXT NOT NULL)');
  });
  afterEach(() => db.dispose());

  const projected = () => db.handle.raw.prepare('SELECT count(*) AS n FROM projected').get() as { n: number };

  it('a lone appender commits inline; appenders of several tasks at once go to the thread, until they have been alone for the hold', async () => {
    const sut = new SqliteEventStore(db.handle, {
      writerThread: { projections: [PROJECTION], whileAlone: 'inline', concurrencyHoldMs: 300 },
    });
    try {
      await sut.ready();
      await sut.append('lone', [taskReceived()], { expected: 'no_stream' });
      for (let s = 1; s <= 5; s++) await sut.append('lone', [outputChunk(s)], { expected: s });
      // a routed write rides with the lone appender's next group: still one task
      const riding = db.handle.lazyDb
        .insertInto('notes' as never)
        .values({ note: 'rides' } as never)
        .execute();
      await sut.append('lone', [outputChunk(6)], { expected: 6 });
      await riding;
      expect(db.handle.raw.prepare('SELECT note FROM notes').all()).toEqual([{ note: 'rides' }]);
      expect(sut.threadGroups()).toBe(0);
      expect(projected().n).toBe(7);

      await Promise.all(
        Array.from({ length: 16 }, (_, a) =>
          sut.append(`t${a}`, [taskReceived()], { expected: 'no_stream' }),
        ),
      );
      const concurrent = sut.threadGroups();
      expect(concurrent).toBeGreaterThan(0);
      // within the hold, a lone append still goes to the thread
      await sut.append('lone', [outputChunk(7)], { expected: 7 });
      expect(sut.threadGroups()).toBe(concurrent + 1);
      await new Promise((r) => setTimeout(r, 350));
      await sut.append('lone', [outputChunk(8)], { expected: 8 });
      expect(sut.threadGroups()).toBe(concurrent + 1);
      // both connections applied the projection, each event once
      expect(projected().n).toBe(7 + 16 + 2);
      expect(sut.commitStats()).toMatchObject({ appends: 7 + 16 + 2, events: 7 + 16 + 2 });
      expect(await sut.streamVersion('lone')).toBe(9);
    } finally {
      await sut.close();
    }
  }, 60_000);

  it('a lone append to a file another connection is writing waits in the thread, not on the event loop', async () => {
    const other = new BetterSqlite3(db.path);
    const handle = openSqlite({ path: db.path, busyTimeoutMs: 5_000 });
    const sut = new SqliteEventStore(handle, { writerThread: { whileAlone: 'inline' } });
    try {
      await sut.ready();
      await sut.append('warm', [taskReceived()], { expected: 'no_stream' });
      expect(sut.threadGroups()).toBe(0);
      other.exec('BEGIN IMMEDIATE');
      const watch = watchLoop();
      const released = new Promise<void>((r) =>
        setTimeout(() => {
          other.exec('COMMIT');
          r();
        }, 400),
      );
      const started = performance.now();
      await sut.append(
        't1',
        [taskReceived({ payload: { input: 'x', session_id: 's' } } as Partial<NewEvent>)],
        {
          expected: 'no_stream',
        },
      );
      const waited = performance.now() - started;
      const { ticks, worstGapMs } = watch.stop();
      await released;
      expect(sut.threadGroups()).toBe(1);
      expect(waited).toBeGreaterThan(300);
      // inline, busy_timeout would have held the loop for the whole 400 ms
      expect(ticks).toBeGreaterThan(10);
      expect(worstGapMs).toBeLessThan(300);
      // the main connection waits for locks again as it was opened to
      expect(handle.raw.pragma('busy_timeout', { simple: true })).toBe(5_000);
      expect(await sut.streamVersion('t1')).toBe(1);
    } finally {
      other.close();
      await sut.close();
      await handle.close();
    }
  }, 60_000);
});
