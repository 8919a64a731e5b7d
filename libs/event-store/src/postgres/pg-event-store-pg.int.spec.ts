import { ConcurrencyError, LeaseLostError, RuntimeEvent } from '@runledger/contracts';
import { EventBus } from '../event-bus';
import { chunks, outputChunk, taskReceived } from '../testing/events';
import { TempPostgres, describePostgres, useTestPostgres } from '@runledger/testing';
import { Client } from 'pg';
import { openPostgres } from './open-postgres';
import { PgEventStore } from './pg-event-store';

const waitFor = async (check: () => boolean, ms = 5000): Promise<void> => {
  for (const start = Date.now(); !check();) {
    if (Date.now() - start > ms) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 20));
  }
};

describePostgres('PgEventStore on PostgreSQL', () => {
  const pg = useTestPostgres();
  let db: TempPostgres;
  let sut: PgEventStore;

  beforeEach(async () => {
    db = await pg.freshSchema();
    sut = new PgEventStore(db.handle);
  });
  afterEach(async () => {
    await sut.close();
    await db.dispose();
  });

  /** a second instance: its own pool on the same schema */
  const otherInstance = () => {
    const handle = openPostgres({ url: db.url, schema: db.schema, maxConnections: 3 });
    return { handle, store: new PgEventStore(handle, { pollMs: 0 }) };
  };

  it('commits appends that arrive together in one transaction, each checked on its own', async () => {
    await sut.append('t0', [taskReceived()], { expected: 'no_stream' });
    // a flush checks out one client for its transaction; nothing else uses the pool meanwhile
    const connect = jest.spyOn(db.handle.pool, 'connect');
    const results = await Promise.allSettled([
      ...Array.from({ length: 10 }, (_, i) =>
        sut.append(`t${i + 1}`, [taskReceived()], { expected: 'no_stream' }),
      ),
      sut.append('t0', [outputChunk(0)], { expected: 5 }),
      sut.append('t0', [outputChunk(1)], { expected: 1 }),
    ]);
    expect(results.map((r) => r.status)).toEqual([...Array(10).fill('fulfilled'), 'rejected', 'fulfilled']);
    expect((results[10] as PromiseRejectedResult).reason).toBeInstanceOf(ConcurrencyError);
    expect(connect).toHaveBeenCalledTimes(1);
    connect.mockRestore();
    expect((await sut.readStream('t0')).map((e) => e.sequence)).toEqual([1, 2]);
    expect((await sut.head()).event_count).toBe(12);
  });

  it('head counts the events without counting the table: refused appends leave position gaps, never a wrong count', async () => {
    // a projection that refuses the streams named 'bad*' after their positions were drawn
    await sut.close();
    sut = new PgEventStore(db.handle, {
      projections: [
        {
          name: 'picky',
          reset: async () => undefined,
          apply: async (_client, events) => {
            if (events.some((e) => e.task_id.startsWith('bad'))) throw new Error('refused by the projection');
          },
        },
      ],
    });
    await sut.append('a', [taskReceived()], { expected: 'no_stream' });
    await expect(sut.append('bad1', [taskReceived()], { expected: 'no_stream' })).rejects.toThrow(/refused/);
    // together in one group: the group is redone one append per savepoint, only the bad one rolled back
    const settled = await Promise.allSettled([
      sut.append('c', [taskReceived(), outputChunk(0)], { expected: 'no_stream' }),
      sut.append('bad2', [taskReceived(), outputChunk(0)], { expected: 'no_stream' }),
      sut.append('e', [taskReceived()], { expected: 'no_stream' }),
    ]);
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    const { rows } = await db.handle.pool.query<{ n: string; top: string }>(
      'SELECT count(*) AS n, max(position) AS top FROM events',
    );
    // the gaps are there: the count is not the highest position
    expect(Number(rows[0].n)).toBeLessThan(Number(rows[0].top));
    const count = jest.spyOn(db.handle.pool, 'query');
    expect(await sut.head()).toEqual({ position: Number(rows[0].top), event_count: Number(rows[0].n) });
    expect(String(count.mock.calls[0][0])).not.toMatch(/count\(/);
    count.mockRestore();
    // a second instance on the same log reads the same head
    const other = otherInstance();
    expect(await other.store.head()).toEqual(await sut.head());
    await other.store.close();
    await other.handle.close();
  });

  it('fences: an append with a lease that is not the current one is refused and writes nothing', async () => {
    await sut.append('t1', [taskReceived()], { expected: 'no_stream' });
    await db.handle.pool.query(
      `INSERT INTO task_leases (task_id, owner, epoch, expires_at) VALUES ('t1', 'proc-b', 2, $1)`,
      [Date.now() + 20_000],
    );
    const stale = sut.append('t1', [outputChunk(0)], { expected: 1, lease: { owner: 'proc-a', epoch: 1 } });
    await expect(stale).rejects.toBeInstanceOf(LeaseLostError);
    await expect(
      sut.append('t1', [outputChunk(0)], { expected: 1, lease: { owner: 'proc-b', epoch: 1 } }),
    ).rejects.toThrow('now epoch 2, owner proc-b');
    await expect(
      sut.append('t2', [taskReceived()], { expected: 'no_stream', lease: { owner: 'proc-b', epoch: 2 } }),
    ).rejects.toThrow('(no lease now)');
    expect(await sut.streamVersion('t1')).toBe(1);
    await expect(
      sut.append('t1', [outputChunk(0)], { expected: 1, lease: { owner: 'proc-b', epoch: 2 } }),
    ).resolves.toMatchObject({ nextExpectedSequence: 2 });
  });

  it('an append on a head this store wrote is one round trip (BEGIN to COMMIT), and stores quotes and backslashes as given', async () => {
    const taskId = "t'1\\";
    await db.handle.pool.query(
      `INSERT INTO task_leases (task_id, owner, epoch, expires_at) VALUES ($1, 'proc-a', 1, $2)`,
      [taskId, Date.now() + 20_000],
    );
    const lease = { owner: 'proc-a', epoch: 1 };
    await sut.append(taskId, [taskReceived({ event_id: "evt_'a" })], { expected: 'no_stream', lease });
    const delta = `it's C:\\temp\\ \\' '' \\\\ ; COMMIT; -- $1 ü 🙂`;
    const queries = jest.spyOn(Client.prototype, 'query');
    try {
      const { events } = await sut.append(
        taskId,
        [outputChunk(0, { event_id: "evt_'b\\", payload: { call_id: "c'1", index: 0, delta } })],
        { expected: 1, lease },
      );
      expect(queries).toHaveBeenCalledTimes(1);
      expect(events[0]).toMatchObject({ event_id: "evt_'b\\", sequence: 2, task_id: taskId });
    } finally {
      queries.mockRestore();
    }
    const stored = await sut.readStream(taskId);
    expect(stored.map((e) => e.event_id)).toEqual(["evt_'a", "evt_'b\\"]);
    expect(stored[1].payload).toEqual({ call_id: "c'1", index: 0, delta });
    // a retry of the same ids is answered with the originals, the check reading ids given as literals
    const retry = await sut.append(taskId, [outputChunk(0, { event_id: "evt_'b\\" })], {
      expected: 1,
      lease,
    });
    expect(retry.positions).toEqual([stored[1].position]);
    await expect(
      sut.append(taskId, [outputChunk(1)], { expected: 2, lease: { owner: 'proc-a', epoch: 0 } }),
    ).rejects.toBeInstanceOf(LeaseLostError);
    expect((await sut.head()).event_count).toBe(2);
  });

  it('an append on a head that moved since this store wrote it (another instance, an erasure) is decided from the reads and writes nothing on the old head', async () => {
    await sut.append('t1', [taskReceived()], { expected: 'no_stream' });
    const b = otherInstance();
    try {
      await b.store.append('t1', [outputChunk(0)], { expected: 1 });
      const moved = await sut.append('t1', [outputChunk(1)], { expected: 'any' });
      expect(moved.events.map((e) => e.sequence)).toEqual([3]);
      await expect(sut.append('t1', [outputChunk(2)], { expected: 2 })).rejects.toBeInstanceOf(
        ConcurrencyError,
      );
      // the session is erased by another instance (its tombstone committed): the next append is refused
      await b.handle.pool.query(
        `INSERT INTO data_keys (session_id, created_at, erased_at) VALUES ('ses_test', 'now', 'now')`,
      );
      await expect(sut.append('t1', [outputChunk(2)], { expected: 3 })).rejects.toThrow(/was erased/);
      await expect(sut.append('t2', [taskReceived()], { expected: 'no_stream' })).rejects.toThrow(
        /was erased/,
      );
    } finally {
      await b.store.close();
      await b.handle.close();
    }
    expect((await sut.readStream('t1')).map((e) => e.event_id)).toHaveLength(3);
    expect(await sut.streamVersion('t2')).toBe(0);
    expect((await sut.head()).event_count).toBe(3);
  });

  it('with a projection, an append on a known head is the guarded insert with BEGIN, the projection, then COMMIT; a head moved meanwhile rolls it back before the projection', async () => {
    await sut.close();
    const projected: number[][] = [];
    sut = new PgEventStore(db.handle, {
      projections: [
        {
          name: 'sequences',
          reset: async () => undefined,
          apply: async (client, events) => {
            await client.query('SELECT 1');
            projected.push(events.map((e) => e.sequence));
          },
        },
      ],
    });
    await sut.append('t1', [taskReceived()], { expected: 'no_stream' });
    const queries = jest.spyOn(Client.prototype, 'query');
    try {
      await sut.append('t1', [outputChunk(0)], { expected: 1 });
      expect(queries).toHaveBeenCalledTimes(3);
    } finally {
      queries.mockRestore();
    }
    const b = otherInstance();
    try {
      await b.store.append('t1', [outputChunk(1)], { expected: 2 });
    } finally {
      await b.store.close();
      await b.handle.close();
    }
    const moved = await sut.append('t1', [outputChunk(2)], { expected: 'any' });
    expect(moved.events.map((e) => e.sequence)).toEqual([4]);
    expect(projected).toEqual([[1], [2], [4]]);
    expect((await sut.head()).event_count).toBe(4);
  });

  it('the append guard reads each stream through its index however large the log grew after the connection planned it', async () => {
    const client = await db.handle.pool.connect();
    try {
      const guard = (taskId: string, version: number, lastId: string | null) =>
        client.query<{ ok: boolean }>(
          'SELECT append_guard(ARRAY[$1]::text[], ARRAY[$2]::integer[], ARRAY[$3]::text[], ARRAY[$1]::text[], ARRAY[$1]::text[]) AS ok',
          [taskId, version, lastId],
        );
      // the connection plans the guard while the log is small (a plan kept from here on)
      for (let i = 0; i < 10; i++) expect((await guard('t0', 0, null)).rows[0].ok).toBe(true);
      await client.query(
        `INSERT INTO events (event_id, task_id, session_id, sequence, type, payload, correlation_id, created_at)
         SELECT 'evt_bulk_' || n, 'bulk', 'bulk', n, 'OUTPUT_CHUNK', '{}', 'bulk', 'now' FROM generate_series(1, 5000) AS n`,
      );
      await client.query('BEGIN');
      for (let i = 0; i < 5; i++) {
        expect((await guard('bulk', 5000, 'evt_bulk_5000')).rows[0].ok).toBe(true);
        expect((await guard('bulk', 4999, 'evt_bulk_4999')).rows[0].ok).toBe(false);
      }
      const { rows } = await client.query<{ seq_scan: number }>(
        `SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relid = 'events'::regclass`,
      );
      expect(Number(rows[0].seq_scan)).toBe(0);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
  });

  it("a subscriber on another instance sees this instance's commits live, in order, once", async () => {
    const b = otherInstance();
    const bus = new EventBus(b.store);
    const seen: RuntimeEvent[] = [];
    const sub = bus.subscribe({}).subscribe((e) => seen.push(e));
    try {
      await sut.append('t1', [taskReceived(), ...chunks(3)], { expected: 'no_stream' });
      await b.store.append('t2', [taskReceived()], { expected: 'no_stream' });
      await sut.append('t1', chunks(2, 3), { expected: 4 });
      await waitFor(() => seen.length === 7);
      const all = await sut.readAll();
      expect(seen.map((e) => e.position)).toEqual(all.map((e) => e.position));
      expect(seen.map((e) => e.event_id)).toEqual(all.map((e) => e.event_id));
    } finally {
      sub.unsubscribe();
      bus.close();
      await b.store.close();
      await b.handle.close();
    }
  });

  it('a reader tailing the global log while four instances append never skips a position', async () => {
    const writers = Array.from({ length: 4 }, () => otherInstance());
    const tailed: number[] = [];
    let writing = true;
    const tail = (async () => {
      let cursor = 0;
      while (writing || (await sut.head()).position > cursor) {
        const page = await sut.readAll({ after_position: cursor, limit: 50 });
        for (const e of page) tailed.push(e.position);
        if (page.length > 0) cursor = page[page.length - 1].position;
      }
    })();
    try {
      await Promise.all(
        writers.map(async (w, i) => {
          for (let n = 0; n < 25; n++)
            await Promise.all([
              w.store.append(`w${i}-${n}`, [taskReceived(), ...chunks(2)], { expected: 'no_stream' }),
              w.store.append(`x${i}-${n}`, [taskReceived()], { expected: 'no_stream' }),
            ]);
        }),
      );
    } finally {
      writing = false;
      await tail;
      for (const w of writers) await w.handle.close();
    }
    const all = (await sut.readAll()).map((e) => e.position);
    expect(all).toHaveLength(4 * 25 * 4);
    expect(tailed).toEqual(all);
  }, 60_000);
});
