import { LeaseLostError, RuntimeEvent } from '@runledger/contracts';
import { InlineProjection } from '../inline-projection';
import { outputChunk, taskReceived } from '../testing/events';
import { TempSqlite, createTempSqlite } from '../testing/sqlite';
import { openSqlite } from './open-sqlite';
import { WriteRoute } from './routed-sqlite-dialect';
import { SqliteEventStore } from './sqlite-event-store';

describe('SqliteEventStore group commit', () => {
  let db: TempSqlite;

  beforeEach(async () => {
    db = await createTempSqlite();
  });
  afterEach(() => db.dispose());

  const concurrent = (sut: SqliteEventStore, n: number) =>
    Promise.all(
      Array.from({ length: n }, (_, i) => sut.append(`t${i}`, [taskReceived()], { expected: 'no_stream' })),
    );

  it('commits appends of the same tick in one transaction', async () => {
    const sut = new SqliteEventStore(db.handle);
    await concurrent(sut, 16);
    expect(sut.commitStats()).toEqual({ transactions: 1, commits: 1, appends: 16, events: 16 });
    await sut.append('t0', [outputChunk(0)], { expected: 1 });
    expect(sut.commitStats()).toEqual({ transactions: 2, commits: 2, appends: 17, events: 17 });
  });

  it('maxBatch 1 is one transaction per append; maxBatch bounds a group', async () => {
    const single = new SqliteEventStore(db.handle, { groupCommit: { maxBatch: 1 } });
    await concurrent(single, 5);
    expect(single.commitStats().commits).toBe(5);
    const bounded = new SqliteEventStore(db.handle, { groupCommit: { maxBatch: 4 } });
    await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        bounded.append(`u${i}`, [taskReceived()], { expected: 'no_stream' }),
      ),
    );
    expect(bounded.commitStats().commits).toBe(3);
  });

  it('a window gathers appends made across ticks into one transaction', async () => {
    const sut = new SqliteEventStore(db.handle, { groupCommit: { windowMs: 30 } });
    const first = sut.append('a', [taskReceived()], { expected: 'no_stream' });
    await new Promise((r) => setTimeout(r, 5));
    const second = sut.append('b', [taskReceived()], { expected: 'no_stream' });
    await Promise.all([first, second]);
    expect(sut.commitStats().commits).toBe(1);
  });

  it('refuses a bad group commit configuration', () => {
    expect(() => new SqliteEventStore(db.handle, { groupCommit: { maxBatch: 0 } })).toThrow(RangeError);
    expect(() => new SqliteEventStore(db.handle, { groupCommit: { windowMs: -1 } })).toThrow(RangeError);
  });

  it('a projection failing for one append rolls back that append only, its projection rows included', async () => {
    const failing: InlineProjection = {
      name: 'picky',
      apply: (raw, events) => {
        for (const e of events) {
          if (e.task_id === 'bad') throw new Error('projection refused bad');
          raw.prepare('INSERT INTO projected (position) VALUES (?)').run(e.position);
        }
      },
      reset: () => undefined,
    };
    db.handle.raw.exec('CREATE TABLE projected (position INTEGER NOT NULL)');
    const sut = new SqliteEventStore(db.handle, { projections: [failing] });
    const heard: RuntimeEvent[] = [];
    sut.onCommitted((events) => heard.push(...events));
    const settled = await Promise.allSettled([
      sut.append('good1', [taskReceived()], { expected: 'no_stream' }),
      sut.append('bad', [taskReceived()], { expected: 'no_stream' }),
      sut.append('good2', [taskReceived()], { expected: 'no_stream' }),
    ]);
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(sut.commitStats()).toEqual({ transactions: 1, commits: 1, appends: 2, events: 2 });
    expect(heard.map((e) => [e.task_id, e.position])).toEqual([
      ['good1', 1],
      ['good2', 2],
    ]);
    expect(db.handle.raw.prepare('SELECT position FROM projected ORDER BY position').all()).toEqual([
      { position: 1 },
      { position: 2 },
    ]);
  });

  const storedEvents = () =>
    db.handle.raw.prepare('SELECT task_id, sequence, position FROM events ORDER BY position').all();

  /** Counts the runs of the append transaction's SAVEPOINT, prepared on `raw` from now on. */
  const countSavepoints = () => {
    const raw = db.handle.raw;
    const prepare = raw.prepare.bind(raw);
    const runs = { savepoints: 0 };
    raw.prepare = ((sql: string) => {
      const statement = prepare(sql);
      if (sql === 'SAVEPOINT append') {
        const run = statement.run.bind(statement);
        statement.run = (...args: unknown[]) => {
          runs.savepoints++;
          return run(...(args as []));
        };
      }
      return statement;
    }) as typeof raw.prepare;
    return runs;
  };

  it('a group takes no savepoint per append; an append that fails once it wrote runs the group again with them', async () => {
    const runs = countSavepoints();
    const failing: InlineProjection = {
      name: 'picky',
      apply: (raw, events) => {
        for (const e of events) if (e.task_id === 'bad') throw new Error('projection refused bad');
      },
      reset: () => undefined,
    };
    const sut = new SqliteEventStore(db.handle, { projections: [failing] });
    await sut.append('a', [taskReceived()], { expected: 'no_stream' });
    // refused by their checks before they write: nothing to undo, no savepoint
    const refused = await Promise.allSettled([
      sut.append('a', [outputChunk(0)], { expected: 1 }),
      sut.append('a', [outputChunk(1)], { expected: 1 }),
      sut.append('b', [taskReceived()], { expected: 'no_stream', lease: { owner: 'p', epoch: 1 } }),
      sut.append('c', [taskReceived(), outputChunk(0)], { expected: 'no_stream' }),
    ]);
    expect(refused.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'rejected', 'fulfilled']);
    expect(runs.savepoints).toBe(0);
    // the projection throws after the inserts: the group runs again, one savepoint per request
    const settled = await Promise.allSettled([
      sut.append('a', [outputChunk(1)], { expected: 2 }),
      sut.append('bad', [taskReceived(), outputChunk(0)], { expected: 'no_stream' }),
      sut.append('d', [taskReceived()], { expected: 'no_stream' }),
    ]);
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(runs.savepoints).toBe(3);
    expect(sut.commitStats()).toEqual({ transactions: 3, commits: 3, appends: 5, events: 6 });
    expect(storedEvents()).toEqual([
      { task_id: 'a', sequence: 1, position: 1 },
      { task_id: 'a', sequence: 2, position: 2 },
      { task_id: 'c', sequence: 1, position: 3 },
      { task_id: 'c', sequence: 2, position: 4 },
      { task_id: 'a', sequence: 3, position: 5 },
      { task_id: 'd', sequence: 1, position: 6 },
    ]);
  });

  it('a routed statement that fails between appends of its group undoes only itself, with no savepoint', async () => {
    db.handle.raw.exec(`CREATE TABLE notes (note TEXT NOT NULL CHECK (note <> 'refused'))`);
    const runs = countSavepoints();
    // the route the store gives the handle: how the handle's kysely writes enter the group commit
    let route: WriteRoute | null = null;
    const routeWrites = db.handle.routeWrites.bind(db.handle);
    db.handle.routeWrites = (r) => {
      route = r;
      routeWrites(r);
    };
    // one task appending: the group commits inline, on the connection whose savepoints are counted
    const sut = new SqliteEventStore(db.handle, { writerThread: { whileAlone: 'inline' } });
    try {
      await sut.ready();
      const insert = 'INSERT INTO notes (note) VALUES (?), (?)';
      const settled = await Promise.allSettled([
        sut.append('a', [taskReceived()], { expected: 'no_stream' }),
        route!(insert, ['first', 'kept'], false),
        sut.append('a', [outputChunk(0)], { expected: 1 }),
        // its first row is inserted before its second breaks the CHECK: SQLite takes the first back
        route!(insert, ['written then undone', 'refused'], false),
        sut.append('a', [outputChunk(1)], { expected: 2 }),
      ]);
      expect(settled.map((s) => s.status)).toEqual([
        'fulfilled',
        'fulfilled',
        'fulfilled',
        'rejected',
        'fulfilled',
      ]);
      expect((settled[3] as PromiseRejectedResult).reason).toMatchObject({ code: 'SQLITE_CONSTRAINT_CHECK' });
      expect(runs.savepoints).toBe(0);
      expect(sut.threadGroups()).toBe(0);
      expect(sut.commitStats()).toEqual({ transactions: 1, commits: 1, appends: 3, events: 3 });
      expect(db.handle.raw.prepare('SELECT note FROM notes ORDER BY rowid').all()).toEqual([
        { note: 'first' },
        { note: 'kept' },
      ]);
      expect(storedEvents()).toEqual([
        { task_id: 'a', sequence: 1, position: 1 },
        { task_id: 'a', sequence: 2, position: 2 },
        { task_id: 'a', sequence: 3, position: 3 },
      ]);
      expect(await sut.head()).toEqual({ position: 3, event_count: 3 });
    } finally {
      await sut.close();
    }
  });

  it('positions stay gap-free across rolled-back savepoints, so head() equals count(*) without counting', async () => {
    const sut = new SqliteEventStore(db.handle);
    for (let round = 0; round < 3; round++) {
      await Promise.allSettled([
        sut.append(`r${round}`, [taskReceived(), outputChunk(0)], { expected: 'no_stream' }),
        sut.append(`r${round}`, [outputChunk(1)], { expected: 0 }),
        sut.append(`q${round}`, [taskReceived()], { expected: 'no_stream' }),
      ]);
    }
    const count = db.handle.raw.prepare('SELECT count(*) AS n FROM events').get() as { n: number };
    expect(count.n).toBe(9);
    expect(await sut.head()).toEqual({ position: 9, event_count: 9 });
    const positions = (await sut.readAll()).map((e) => e.position);
    expect(positions).toEqual(Array.from({ length: 9 }, (_, i) => i + 1));
  });

  it('an append is durable when its caller resumes: another connection reads it', async () => {
    const sut = new SqliteEventStore(db.handle);
    const other = openSqlite({ path: db.path });
    try {
      const results = await concurrent(sut, 4);
      const seen = other.raw.prepare('SELECT count(*) AS n FROM events').get() as { n: number };
      expect(seen.n).toBe(4);
      expect(results.map((r) => r.positions[0]).sort()).toEqual([1, 2, 3, 4]);
    } finally {
      await other.close();
    }
  });

  describe('fencing', () => {
    const lease = (owner: string, epoch: number) =>
      db.handle.raw
        .prepare(
          `INSERT INTO task_leases (task_id, owner, epoch, expires_at) VALUES ('t1', ?, ?, 0)
           ON CONFLICT (task_id) DO UPDATE SET owner = excluded.owner, epoch = excluded.epoch`,
        )
        .run(owner, epoch);

    it('appends with the current lease; a taken-over lease is LeaseLostError and writes nothing, in a group too', async () => {
      const sut = new SqliteEventStore(db.handle);
      lease('proc-a', 1);
      await sut.append('t1', [taskReceived()], {
        expected: 'no_stream',
        lease: { owner: 'proc-a', epoch: 1 },
      });
      lease('proc-b', 2);
      const [stale, fresh, other] = await Promise.allSettled([
        sut.append('t1', [outputChunk(0)], { expected: 1, lease: { owner: 'proc-a', epoch: 1 } }),
        sut.append('t1', [outputChunk(1)], { expected: 1, lease: { owner: 'proc-b', epoch: 2 } }),
        sut.append('t2', [taskReceived()], { expected: 'no_stream' }),
      ]);
      expect(stale.status).toBe('rejected');
      const lost = (stale as PromiseRejectedResult).reason as LeaseLostError;
      expect(lost).toBeInstanceOf(LeaseLostError);
      expect(lost.details).toEqual({
        task_id: 't1',
        held: { owner: 'proc-a', epoch: 1 },
        current: { owner: 'proc-b', epoch: 2 },
      });
      expect(fresh.status).toBe('fulfilled');
      expect(other.status).toBe('fulfilled');
      expect((await sut.readStream('t1')).map((e) => (e.payload as { index?: number }).index)).toEqual([
        undefined,
        1,
      ]);
    });

    it('a lease on a task with no lease row is lost; an append without a lease is not fenced', async () => {
      const sut = new SqliteEventStore(db.handle);
      await expect(
        sut.append('t9', [taskReceived()], { expected: 'no_stream', lease: { owner: 'p', epoch: 1 } }),
      ).rejects.toMatchObject({ code: 'lease_lost', details: { current: null } });
      await expect(sut.append('t9', [taskReceived()], { expected: 'no_stream' })).resolves.toBeDefined();
    });
  });
});
