/**
 * npm run bench -- erasure
 * What sealing payloads for erasure (RUNLEDGER_ERASURE=on) costs: the same store code with and
 * without `sealPayloads`, side by side in one run, on fresh databases, in alternating rounds:
 *   - append events/s, batches of 20 events per append (CPU-bound: where the AES-GCM shows)
 *   - append events/s, one event per append (the durable path: one commit each)
 *   - read-back events/s (readStream: every sealed payload opened)
 * Events are realistic ones: a TASK_RECEIVED and OUTPUT_CHUNKs of ~300 bytes of personal text, 20
 * sessions, 1 task per session per round. SQLite (synchronous FULL, inline appends) and PostgreSQL.
 * Env: BENCH_ERASURE_EVENTS (4000 per side per round on SQLite batches), BENCH_ERASURE_ROUNDS (5),
 * BENCH_PG_URL (else RUNLEDGER_TEST_PG_URL, else the local server).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NewEvent } from '@runledger/contracts';
import { EventStore, PgEventStore, SqliteEventStore, openPostgres, openSqlite } from '@runledger/event-store';
import { migrateToLatest } from '@runledger/migrations';
import { chunkEvent, fmt, median, recordFigure } from './bench-support';
import { admin } from './event-store-pg';

const EVENTS = Number(process.env.BENCH_ERASURE_EVENTS ?? 4000);
const ROUNDS = Number(process.env.BENCH_ERASURE_ROUNDS ?? 5);
const SESSIONS = 20;
const BATCH = 20;
const PG_URL =
  process.env.BENCH_PG_URL ??
  process.env.RUNLEDGER_TEST_PG_URL ??
  'postgres://runledger:runledger@localhost:5432/runledger';

const received = (session: string): NewEvent =>
  ({
    type: 'TASK_RECEIVED',
    payload: {
      input: `summarise the notes of ${session}: `.padEnd(200, 'private words '),
      session_id: session,
    },
  }) as NewEvent;

interface Sides {
  clear: EventStore;
  sealed: EventStore;
}

/** `events` events spread over SESSIONS fresh tasks, `perAppend` per append; events/s. */
async function append(store: EventStore, round: string, events: number, perAppend: number): Promise<number> {
  const perTask = Math.ceil(events / SESSIONS);
  const start = performance.now();
  await Promise.all(
    Array.from({ length: SESSIONS }, async (_, s) => {
      const taskId = `t_${round}_${s}`;
      await store.append(taskId, [received(`ses_${round}_${s}`)], { expected: 'no_stream' });
      for (let seq = 1; seq < perTask; seq += perAppend) {
        const n = Math.min(perAppend, perTask - seq);
        await store.append(
          taskId,
          Array.from({ length: n }, (_, i) => chunkEvent(seq + i)),
          { expected: seq },
        );
      }
    }),
  );
  return (SESSIONS * perTask) / ((performance.now() - start) / 1000);
}

/** Every stream of the round read back; events/s. */
async function read(store: EventStore, round: string): Promise<number> {
  const start = performance.now();
  let n = 0;
  for (let s = 0; s < SESSIONS; s++) n += (await store.readStream(`t_${round}_${s}`)).length;
  return n / ((performance.now() - start) / 1000);
}

interface Result {
  clear: number[];
  sealed: number[];
}

/** Rounds alternating which side goes first; per-round ratios, whose median is the figure. */
async function measure(
  sides: Sides,
  label: string,
  events: number,
  perAppend: number,
): Promise<{ append: Result; read: Result }> {
  const out = { append: { clear: [], sealed: [] } as Result, read: { clear: [], sealed: [] } as Result };
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? (['clear', 'sealed'] as const) : (['sealed', 'clear'] as const);
    for (const side of order) {
      const round = `${label}${r}`;
      out.append[side].push(await append(sides[side], round, events, perAppend));
      out.read[side].push(await read(sides[side], round));
    }
  }
  return out;
}

function report(driver: string, what: string, r: Result): number {
  const ratios = r.sealed.map((s, i) => s / r.clear[i]);
  const ratio = median(ratios);
  console.log(
    `  ${what.padEnd(34)} clear ${fmt(median(r.clear)).padStart(8)} events/s   sealed ${fmt(median(r.sealed)).padStart(8)} events/s   ratio ${ratio.toFixed(2)}x (median of ${ROUNDS} rounds)`,
  );
  recordFigure({
    figure: `${driver} ${what}, erasure on vs off`,
    value: `${fmt(median(r.sealed))} vs ${fmt(median(r.clear))} events/s`,
    ratio,
    target: '>= 0.5x (off by default; the cost is reported)',
    met: ratio >= 0.5,
  });
  return ratio;
}

async function sqlite(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'rl-bench-erasure-'));
  const open = async (name: string, seal: boolean) => {
    const handle = openSqlite({ path: join(dir, `${name}.db`), synchronous: 'FULL' });
    await migrateToLatest(handle.db);
    return { handle, store: new SqliteEventStore(handle, { sealPayloads: seal }) };
  };
  const clear = await open('clear', false);
  const sealed = await open('sealed', true);
  try {
    const sides = { clear: clear.store, sealed: sealed.store };
    console.log(
      `\nSQLite (FULL, inline appends): ${fmt(EVENTS)} events per side per round over ${SESSIONS} sessions, ${ROUNDS} rounds`,
    );
    const batched = await measure(sides, 'b', EVENTS, BATCH);
    report('SQLite', `append, ${BATCH} events per append`, batched.append);
    report('SQLite', 'read back (readStream)', batched.read);
    const single = await measure(sides, 's', Math.max(SESSIONS * 2, EVENTS / 10), 1);
    report('SQLite', 'append, 1 event per append', single.append);
  } finally {
    for (const s of [clear, sealed]) {
      await s.store.close();
      await s.handle.close();
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

async function postgres(): Promise<void> {
  const database = `rl_bench_erasure_${process.pid}_${randomBytes(3).toString('hex')}`;
  try {
    await admin(PG_URL, `CREATE DATABASE ${database}`);
  } catch (err) {
    console.log(
      `\nPostgreSQL skipped: cannot reach the server (${(err as Error).message}); set BENCH_PG_URL`,
    );
    return;
  }
  const url = new URL(PG_URL);
  url.pathname = `/${database}`;
  const handles = ['clear', 'sealed'].map((schema) =>
    openPostgres({ url: url.toString(), schema, maxConnections: SESSIONS + 2 }),
  );
  try {
    for (const h of handles) {
      await admin(url.toString(), `CREATE SCHEMA ${h.schema}`);
      await migrateToLatest(h.db);
    }
    const sides = {
      clear: new PgEventStore(handles[0]),
      sealed: new PgEventStore(handles[1], { sealPayloads: true }),
    };
    const events = Math.max(SESSIONS * 2, EVENTS / 4);
    console.log(
      `\nPostgreSQL: ${fmt(events)} events per side per round over ${SESSIONS} sessions, ${ROUNDS} rounds`,
    );
    const batched = await measure(sides, 'b', events, BATCH);
    report('PostgreSQL', `append, ${BATCH} events per append`, batched.append);
    report('PostgreSQL', 'read back (readStream)', batched.read);
    const single = await measure(sides, 's', Math.max(SESSIONS * 2, events / 10), 1);
    report('PostgreSQL', 'append, 1 event per append', single.append);
    await sides.clear.close();
    await sides.sealed.close();
  } finally {
    for (const h of handles) await h.close();
    await admin(PG_URL, `DROP DATABASE ${database}`).catch(() => undefined);
  }
}

export async function main(): Promise<void> {
  await sqlite();
  await postgres();
}
