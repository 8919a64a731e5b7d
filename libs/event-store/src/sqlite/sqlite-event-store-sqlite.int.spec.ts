import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { sql } from 'kysely';
import { taskReceived, chunks } from '../testing/events';
import { TempSqlite, createTempSqlite } from '../testing/sqlite';
import BetterSqlite3 from 'better-sqlite3';
import { openSqlite } from './open-sqlite';
import { SqliteEventStore, StoreBusyError } from './sqlite-event-store';
import { InlineProjection } from '../inline-projection';
import { EventBus } from '../event-bus';

interface WriterOutcome {
  committed: string[];
  rejected: string[];
}

describe('SqliteEventStore on a real file', () => {
  let db: TempSqlite;
  let sut: SqliteEventStore;

  beforeEach(async () => {
    db = await createTempSqlite();
    sut = new SqliteEventStore(db.handle);
  });
  afterEach(() => db.dispose());

  it('opens in WAL mode with the requested pragmas and creates the folder', () => {
    expect(db.handle.raw.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(db.handle.raw.pragma('synchronous', { simple: true })).toBe(1); // NORMAL, as the helper asked
    expect(db.handle.raw.pragma('busy_timeout', { simple: true })).toBe(5000);
    expect(db.handle.raw.pragma('foreign_keys', { simple: true })).toBe(1);
  });

  it('commits appends at FULL while the connection writes derived tables at NORMAL', async () => {
    const full = await createTempSqlite({ synchronous: 'FULL' });
    try {
      const levels: number[] = [];
      const spy: InlineProjection = {
        name: 'synchronous-spy',
        apply: (raw) => void levels.push(Number(raw.pragma('synchronous', { simple: true }))),
        reset: () => undefined,
      };
      const store = new SqliteEventStore(full.handle, { projections: [spy] });
      // one append alone, then two in one group
      await store.append('t1', [taskReceived()], { expected: 'no_stream' });
      await Promise.all([
        store.append('t1', chunks(1), { expected: 1 }),
        store.append('t2', [taskReceived()], { expected: 'no_stream' }),
      ]);
      expect(levels).toEqual([2, 2, 2]); // FULL inside every append transaction
      expect(full.handle.raw.pragma('synchronous', { simple: true })).toBe(1); // NORMAL outside them
      expect(full.handle.appendSynchronous).toBe('FULL');
      await store.close();
    } finally {
      await full.dispose();
    }
  });

  it('reads a stream at once, but not inside a kysely transaction on its connection: that read waits for it and never sees what it rolled back', async () => {
    await sut.append('t1', [taskReceived(), ...chunks(2)], { expected: 'no_stream' });
    expect(await sut.streamVersion('t1')).toBe(3);
    expect((await sut.readStream('t1', { after_seq: 1, limit: 1 })).map((e) => e.sequence)).toEqual([2]);
    let reads: Promise<[number, number[]]> | null = null;
    await expect(
      db.handle.db.transaction().execute(async (trx) => {
        await sql`INSERT INTO events (event_id, task_id, session_id, sequence, type, payload, correlation_id, created_at, schema_version)
                  VALUES ('evt_never', 't1', 'ses_test', 4, 'OUTPUT_CHUNK', '{}', 't1', '2026-01-01T00:00:00Z', 1)`.execute(
          trx,
        );
        reads = Promise.all([
          sut.streamVersion('t1'),
          sut.readStream('t1').then((events) => events.map((e) => e.sequence)),
        ]);
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    expect(await reads).toEqual([3, [1, 2, 3]]);
  });

  it('refuses UPDATE and DELETE on events issued directly through SQL', async () => {
    await sut.append('t1', [taskReceived(), ...chunks(2)], { expected: 'no_stream' });
    expect(() =>
      db.handle.raw.prepare("UPDATE events SET type = 'TASK_FAILED' WHERE sequence = 2").run(),
    ).toThrow(/append-only/);
    expect(() => db.handle.raw.prepare('DELETE FROM events').run()).toThrow(/append-only/);
    const viaKysely = await sql`DELETE FROM events WHERE task_id = 't1'`.execute(db.handle.db).then(
      () => 'deleted',
      (err: unknown) => err,
    );
    expect(String(viaKysely)).toMatch(/append-only/);
    expect(await sut.readStream('t1')).toHaveLength(3);
  });

  it('rolls the append back when an inline projection throws, and publishes nothing', async () => {
    const failing: InlineProjection = {
      name: 'failing',
      apply: () => {
        throw new Error('projection broke');
      },
      reset: () => undefined,
    };
    const withProjection = new SqliteEventStore(db.handle, { projections: [failing] });
    const seen: unknown[] = [];
    withProjection.onCommitted((events) => seen.push(...events));
    await expect(withProjection.append('t1', [taskReceived()], { expected: 'no_stream' })).rejects.toThrow(
      'projection broke',
    );
    expect(await sut.head()).toEqual({ position: 0, event_count: 0 });
    expect(seen).toEqual([]);
  });

  it('waits out a lock held longer than busy_timeout: SQLITE_BUSY never reaches the caller', async () => {
    const other = new BetterSqlite3(db.path);
    const handle = openSqlite({ path: db.path, busyTimeoutMs: 20 });
    const impatient = new SqliteEventStore(handle);
    try {
      other.exec('BEGIN IMMEDIATE');
      const append = impatient.append('t1', [taskReceived()], { expected: 'no_stream' });
      await new Promise((r) => setTimeout(r, 300));
      other.exec('COMMIT');
      await expect(append).resolves.toMatchObject({ nextExpectedSequence: 1 });
    } finally {
      other.close();
      await handle.close();
    }
  });

  it('gives up with StoreBusyError, writing nothing, when the lock outlives the retry window', async () => {
    const other = new BetterSqlite3(db.path);
    const handle = openSqlite({ path: db.path, busyTimeoutMs: 10 });
    const impatient = new SqliteEventStore(handle, { busyRetryMs: 100 });
    try {
      other.exec('BEGIN IMMEDIATE');
      await expect(
        impatient.append('t1', [taskReceived()], { expected: 'no_stream' }),
      ).rejects.toBeInstanceOf(StoreBusyError);
      other.exec('ROLLBACK');
      expect(await sut.head()).toEqual({ position: 0, event_count: 0 });
    } finally {
      other.close();
      await handle.close();
    }
  });

  it('8 concurrent writers on one file: every event committed once or rejected with ConcurrencyError, no gap, no duplicate', async () => {
    const writers = 8;
    const appends = 25;
    const start = new SharedArrayBuffer(4);
    const register = require.resolve('@swc-node/register');
    const body = join(__dirname, '..', 'testing', 'concurrent-writer.ts');
    const workers = Array.from({ length: writers }, (_, writer) => {
      const worker = new Worker(`require(${JSON.stringify(register)}); require(${JSON.stringify(body)});`, {
        eval: true,
        workerData: { path: db.path, taskId: 'shared', writer, appends, start },
      });
      let ready!: () => void;
      const isReady = new Promise<void>((r) => (ready = r));
      const done = new Promise<WriterOutcome>((resolve, reject) => {
        worker.on('message', (m: WriterOutcome & { ready?: true; error?: string }) => {
          if (m.ready) ready();
          else if (m.error) reject(new Error(m.error));
          else resolve(m);
        });
        worker.once('error', reject);
      });
      return { isReady, done };
    });
    // release every writer at once, after all of them have compiled and opened the file
    await Promise.all(workers.map((w) => w.isReady));
    Atomics.store(new Int32Array(start), 0, 1);
    Atomics.notify(new Int32Array(start), 0);
    const results = workers.map((w) => w.done);
    const outcomes = await Promise.all(results);

    const committed = outcomes.flatMap((o) => o.committed);
    const rejected = outcomes.flatMap((o) => o.rejected);
    expect(committed.length + rejected.length).toBe(writers * appends);
    const stream = await sut.readStream('shared');
    expect(stream.map((e) => e.sequence)).toEqual(Array.from({ length: stream.length }, (_, i) => i + 1));
    expect(stream.map((e) => e.event_id).sort()).toEqual([...committed].sort());
    expect(new Set(stream.map((e) => e.event_id)).size).toBe(stream.length);
    for (const id of rejected) expect(stream.some((e) => e.event_id === id)).toBe(false);
    // the writers did race: some appends lost (otherwise this test proves nothing about conflicts)
    expect(rejected.length).toBeGreaterThan(0);
  }, 60_000);

  it('its commit stream also carries what other connections on the file committed: in position order, no gap', async () => {
    // another process on the same file (the CLI beside a running server), as a second connection
    const other = openSqlite({ path: db.path, synchronous: 'NORMAL' });
    const foreign = new SqliteEventStore(other);
    const bus = new EventBus(sut);
    const live: number[] = [];
    const all: number[] = [];
    const liveSub = bus.events$.subscribe((e) => live.push(e.position));
    const allSub = bus.subscribe({}).subscribe((e) => all.push(e.position));
    try {
      await foreign.append('cli-task', [taskReceived(), ...chunks(2)], { expected: 'no_stream' });
      await sut.append('server-task', [taskReceived()], { expected: 'no_stream' });
      // the server's own commit at 4 is published after 1..3, never before them and never without them
      expect(live).toEqual([1, 2, 3, 4]);

      // a foreign commit while this process writes nothing still arrives
      await foreign.append('cli-task', chunks(1, 2), { expected: 3 });
      for (let i = 0; i < 200 && live.length < 5; i++) await new Promise((r) => setTimeout(r, 25));
      expect(live).toEqual([1, 2, 3, 4, 5]);
      expect(all).toEqual([1, 2, 3, 4, 5]);
    } finally {
      liveSub.unsubscribe();
      allSub.unsubscribe();
      bus.close();
      await other.close();
    }
  });
});
