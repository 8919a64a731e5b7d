/**
 * npm run bench -- erasure
 * What sealing for erasure (RUNLEDGER_ERASURE=on) costs: the same storage (event store and the tasks
 * projection, as the server wires them) with and without `sealPayloads`, side by side in one run, on
 * fresh databases, in alternating rounds:
 *   - append events/s, batches of 20 events per append (CPU-bound: where the AES-GCM shows)
 *   - append events/s, one event per append (the durable path: one commit each)
 *   - read-back events/s (readStream: every sealed payload opened)
 *   - task rows read/s (TaskStateStore.get: the row's sealed columns opened)
 *   - GET /tasks?q= searches/s over the table (with erasure on, every row it passes is opened)
 *   - memory: inserts/s (text, metadata and vector sealed) and searches/s (hits opened), and
 *     searches/s read from the table (keepLiveEntries off: every vector of the scan opened)
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
import { EventStore } from '@runledger/event-store';
import { HashingEmbedder, MemoryDatabase, MemoryService, MemoryStore } from '@runledger/memory';
import { Storage, TaskStateStore, createPostgresStorage, createSqliteStorage } from '@runledger/state-store';
import { Kysely } from 'kysely';
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

interface Side {
  store: EventStore;
  tasks: TaskStateStore;
}

interface Sides {
  clear: Side;
  sealed: Side;
}

const sideOf = (s: Storage): Side => ({ store: s.eventStore, tasks: s.taskStates });

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

const GET_PASSES = 10;

/** Every task row of the round read (GET /tasks/:id), GET_PASSES times; rows/s. */
async function getRows(tasks: TaskStateStore, round: string): Promise<number> {
  const start = performance.now();
  for (let p = 0; p < GET_PASSES; p++) for (let s = 0; s < SESSIONS; s++) await tasks.get(`t_${round}_${s}`);
  return (GET_PASSES * SESSIONS) / ((performance.now() - start) / 1000);
}

/** Searches of the whole table by input (GET /tasks?q=, a first page of 50), one per session of the round; searches/s. */
async function search(tasks: TaskStateStore, round: string): Promise<number> {
  const start = performance.now();
  for (let s = 0; s < SESSIONS; s += 4) await tasks.list({ q: `notes of ses_${round}_${s}:`, limit: 50 });
  return Math.ceil(SESSIONS / 4) / ((performance.now() - start) / 1000);
}

interface Result {
  clear: number[];
  sealed: number[];
}

type Measured = { append: Result; read: Result; get: Result; search: Result };

/** Rounds alternating which side goes first; per-round ratios, whose median is the figure. */
async function measure(sides: Sides, label: string, events: number, perAppend: number): Promise<Measured> {
  const empty = (): Result => ({ clear: [], sealed: [] });
  const out: Measured = { append: empty(), read: empty(), get: empty(), search: empty() };
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? (['clear', 'sealed'] as const) : (['sealed', 'clear'] as const);
    for (const side of order) {
      const round = `${label}${r}`;
      out.append[side].push(await append(sides[side].store, round, events, perAppend));
      out.read[side].push(await read(sides[side].store, round));
      out.get[side].push(await getRows(sides[side].tasks, round));
      out.search[side].push(await search(sides[side].tasks, round));
    }
  }
  return out;
}

function report(driver: string, what: string, r: Result, unit = 'events/s'): number {
  const ratios = r.sealed.map((s, i) => s / r.clear[i]);
  const ratio = median(ratios);
  console.log(
    `  ${what.padEnd(40)} clear ${fmt(median(r.clear)).padStart(8)} ${unit}   sealed ${fmt(median(r.sealed)).padStart(8)} ${unit}   ratio ${ratio.toFixed(2)}x (median of ${ROUNDS} rounds)`,
  );
  recordFigure({
    figure: `${driver} ${what}, erasure on vs off`,
    value: `${fmt(median(r.sealed))} vs ${fmt(median(r.clear))} ${unit}`,
    ratio,
    target: '>= 0.5x (off by default; the cost is reported)',
    met: ratio >= 0.5,
  });
  return ratio;
}

const MEMORY_ENTRIES = 100;
const MEMORY_SEARCHES = 50;

/** Memory over a side's storage, as the server opens it (no index file); `fromTable`: no live entries kept. */
const memoryOf = (s: Storage, fromTable: boolean) =>
  MemoryService.open({
    store: new MemoryStore(
      s.db as unknown as Kysely<MemoryDatabase>,
      s.db as unknown as Kysely<MemoryDatabase>,
      s.eventStore,
    ),
    events: s.eventStore,
    embedder: new HashingEmbedder(),
    indexPath: null,
    ...(fromTable ? { keepLiveEntries: false, exactScanBelow: 1_000_000 } : {}),
  });

/** Inserts of entries for the round's sessions, then searches; inserts/s and searches/s. */
async function memoryRound(memory: MemoryService, reader: MemoryService, round: string) {
  let start = performance.now();
  for (let i = 0; i < MEMORY_ENTRIES; i++)
    await memory.insert({
      text: `ses_${round}_${i % SESSIONS} prefers ${i} private things `.padEnd(200, 'words '),
      kind: 'fact',
      source: 'user',
      weight: 0.8,
      reason: 'bench',
      session_id: `ses_${round}_${i % SESSIONS}`,
      metadata: { note: `about ${i}` },
    });
  const inserts = MEMORY_ENTRIES / ((performance.now() - start) / 1000);
  const searchAll = async (m: MemoryService) => {
    start = performance.now();
    for (let i = 0; i < MEMORY_SEARCHES; i++) await m.search(`prefers ${i * 2} private`, { k: 5 });
    return MEMORY_SEARCHES / ((performance.now() - start) / 1000);
  };
  return { inserts, searches: await searchAll(memory), tableScans: await searchAll(reader) };
}

async function measureMemory(driver: string, storages: { clear: Storage; sealed: Storage }): Promise<void> {
  const open = async (s: Storage) => ({ memory: await memoryOf(s, false), reader: await memoryOf(s, true) });
  const sides = { clear: await open(storages.clear), sealed: await open(storages.sealed) };
  const empty = (): Result => ({ clear: [], sealed: [] });
  const out = { inserts: empty(), searches: empty(), tableScans: empty() };
  try {
    for (let r = 0; r < ROUNDS; r++) {
      const order = r % 2 === 0 ? (['clear', 'sealed'] as const) : (['sealed', 'clear'] as const);
      for (const side of order) {
        const m = await memoryRound(sides[side].memory, sides[side].reader, `m${r}`);
        for (const k of ['inserts', 'searches', 'tableScans'] as const) out[k][side].push(m[k]);
      }
    }
  } finally {
    for (const s of Object.values(sides)) {
      await s.memory.close();
      await s.reader.close();
    }
  }
  report(driver, `memory insert (${MEMORY_ENTRIES} a round)`, out.inserts, 'inserts/s');
  report(driver, 'memory search, k=5 (index, live entries)', out.searches, 'searches/s');
  report(driver, 'memory search read from the table', out.tableScans, 'searches/s');
}

/** The figures of one driver: batched appends (with the reads after them), then single appends. */
async function measureDriver(driver: string, sides: Sides, events: number): Promise<void> {
  const batched = await measure(sides, 'b', events, BATCH);
  report(driver, `append, ${BATCH} events per append`, batched.append);
  report(driver, 'read back (readStream)', batched.read);
  report(driver, 'task row read (GET /tasks/:id)', batched.get, 'rows/s');
  report(driver, 'search of the table (GET /tasks?q=)', batched.search, 'searches/s');
  const single = await measure(sides, 's', Math.max(SESSIONS * 2, events / 10), 1);
  report(driver, 'append, 1 event per append', single.append);
}

async function sqlite(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'rl-bench-erasure-'));
  const open = (name: string, seal: boolean) =>
    createSqliteStorage({ path: join(dir, `${name}.db`), synchronous: 'FULL', sealPayloads: seal });
  const clear = await open('clear', false);
  const sealed = await open('sealed', true);
  try {
    console.log(
      `\nSQLite (FULL, inline appends, tasks projection): ${fmt(EVENTS)} events per side per round over ${SESSIONS} sessions, ${ROUNDS} rounds`,
    );
    await measureDriver('SQLite', { clear: sideOf(clear), sealed: sideOf(sealed) }, EVENTS);
    await measureMemory('SQLite', { clear, sealed });
  } finally {
    await clear.close();
    await sealed.close();
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
  const storages: Storage[] = [];
  try {
    for (const [schema, seal] of [
      ['clear', false],
      ['sealed', true],
    ] as const)
      storages.push(
        await createPostgresStorage({
          url: url.toString(),
          schema,
          maxConnections: SESSIONS + 2,
          sealPayloads: seal,
        }),
      );
    const events = Math.max(SESSIONS * 2, EVENTS / 4);
    console.log(
      `\nPostgreSQL (tasks projection): ${fmt(events)} events per side per round over ${SESSIONS} sessions, ${ROUNDS} rounds`,
    );
    await measureDriver('PostgreSQL', { clear: sideOf(storages[0]), sealed: sideOf(storages[1]) }, events);
    await measureMemory('PostgreSQL', { clear: storages[0], sealed: storages[1] });
  } finally {
    for (const s of storages) await s.close();
    await admin(PG_URL, `DROP DATABASE ${database}`).catch(() => undefined);
  }
}

export async function main(): Promise<void> {
  await sqlite();
  await postgres();
}
