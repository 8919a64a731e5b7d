/**
 * npm run bench -- event-store
 * SqliteEventStore against raw better-sqlite3 doing the same inserts, same
 * schema and same pragmas (openSqlite), in the same run, on fresh files:
 *   - single-event append transactions (the durable path: synchronous=FULL by default)
 *   - batches of 100 events per transaction
 *   - stream read-back (events/s)
 * Per-task streams, ~300-byte payloads. Raw and store alternate in rounds so
 * machine noise hits both sides alike; the per-round median ratio is the
 * figure to trust on a shared machine.
 *   - concurrent appenders (1/4/16/64, one event per append, each appender
 *     awaiting its previous append): group commit, on the main thread and in
 *     the writer thread, against one transaction per append (same store code,
 *     maxBatch 1), medians of BENCH_CONCURRENT_ROUNDS; with the longest the
 *     event loop was held during a run
 *   - commits (one fsync each at FULL) per 7-step task, critic and memory off and on
 * Env: BENCH_EVENTS (20000), BENCH_STREAM_LEN (100), BENCH_SYNCHRONOUS (FULL), BENCH_ROUNDS (10),
 * BENCH_PROJECTION=1 adds the store with the task-state projection inline (what the server runs),
 * BENCH_CONCURRENT_EVENTS (1024 per measurement), BENCH_CONCURRENT_ROUNDS (5).
 * Then PostgreSQL: PgEventStore against raw pg inserts (./event-store-pg.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import {
  EventStore,
  SqliteEventStore,
  SqliteHandle,
  SqliteSynchronous,
  openSqlite,
} from '@runledger/event-store';
import { migrateToLatest } from '@runledger/migrations';
import { HeuristicCritic } from '@runledger/critic';
import { createCriticMemoryHook, createMemoryEndGuard } from '@runledger/memory';
import { ScriptedBackend } from '@runledger/runtime';
import { createSqliteStorage } from '@runledger/state-store';
import type BetterSqlite3 from 'better-sqlite3';
import {
  RuleTablePolicy,
  SEVEN_STEP_PLAN,
  startTestRuntime,
  testToolRegistry,
} from '../libs/runtime/src/testing';
import { openSqliteWithMemory } from '../libs/runtime/src/testing/sqlite-memory';
import { chunkEvent, chunkPayload, fmt, rawChunkRow } from './bench-support';
import { main as postgresMain } from './event-store-pg';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 20_000);
const STREAM_LEN = Number(process.env.BENCH_STREAM_LEN ?? 100);
const SYNCHRONOUS = (process.env.BENCH_SYNCHRONOUS ?? 'FULL') as SqliteSynchronous;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 10);
const WITH_PROJECTION = process.env.BENCH_PROJECTION === '1';
const CONCURRENT_EVENTS = Number(process.env.BENCH_CONCURRENT_EVENTS ?? 1024);
const CONCURRENT_ROUNDS = Number(process.env.BENCH_CONCURRENT_ROUNDS ?? 5);
const APPENDERS = [1, 4, 16, 64];

interface Side {
  name: string;
  /** append `count` events of stream `taskId` starting after sequence `after`, `perTx` per transaction */
  append(taskId: string, after: number, count: number, perTx: number): Promise<void>;
  readStream(taskId: string): Promise<number>;
  close(): Promise<void>;
}

function rawSide(handle: SqliteHandle): Side {
  const raw: BetterSqlite3.Database = handle.raw;
  // the connection runs at NORMAL at most and the store's appends at SYNCHRONOUS (connectionSynchronous):
  // raw inserts commit at the appends' level
  raw.pragma(`synchronous = ${handle.appendSynchronous}`);
  const insert = raw.prepare(
    `INSERT INTO events (event_id, task_id, session_id, sequence, type, payload, causation_id, correlation_id, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const writeBatch = raw.transaction((taskId: string, from: number, n: number) => {
    const now = new Date().toISOString();
    for (let s = from; s < from + n; s++) insert.run(...rawChunkRow(taskId, s, now));
  });
  const read = raw.prepare('SELECT * FROM events WHERE task_id = ? AND sequence > ? ORDER BY sequence');
  return {
    name: 'raw better-sqlite3',
    async append(taskId, after, count, perTx) {
      for (let s = after + 1; s <= after + count; s += perTx)
        writeBatch.immediate(taskId, s, Math.min(perTx, after + count - s + 1));
    },
    async readStream(taskId) {
      const rows = read.all(taskId, 0) as { payload: string }[];
      for (const r of rows) r.payload = JSON.parse(r.payload) as string;
      return rows.length;
    },
    close: () => handle.close(),
  };
}

function storeSide(name: string, store: EventStore, close: () => Promise<void>): Side {
  return {
    name,
    async append(taskId, after, count, perTx) {
      for (let s = after; s < after + count; s += perTx) {
        const n = Math.min(perTx, after + count - s);
        await store.append(
          taskId,
          Array.from({ length: n }, (_, i) => chunkEvent(s + i + 1)),
          { expected: s },
        );
      }
    },
    async readStream(taskId) {
      return (await store.readWholeStream(taskId)).length;
    },
    close,
  };
}

interface Measure {
  seconds: number;
  /** CPU time of this process (user + system): less sensitive to other load on the machine than wall time */
  cpuSeconds: number;
  events: number;
}

async function timed(fn: () => Promise<number>): Promise<Measure> {
  const t0 = process.hrtime.bigint();
  const c0 = process.cpuUsage();
  const events = await fn();
  const cpu = process.cpuUsage(c0);
  return {
    seconds: Number(process.hrtime.bigint() - t0) / 1e9,
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
    events,
  };
}

interface Comparison {
  totals: Measure[];
  /** per side, the median over rounds of (rate / raw rate in the same round) */
  medianRatios: number[];
}

const rate = (m: Measure) => m.events / m.seconds;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/**
 * Run the same workload on every side, alternating in rounds (the side that
 * goes first rotates), so load from other processes lands on both sides.
 */
async function compare(
  sides: Side[],
  workload: (side: Side, round: number) => Promise<number>,
): Promise<Comparison> {
  const totals = sides.map(() => ({ seconds: 0, cpuSeconds: 0, events: 0 }));
  const ratios: number[][] = sides.map(() => []);
  for (let round = 0; round < ROUNDS; round++) {
    const roundRates: number[] = new Array<number>(sides.length);
    for (let k = 0; k < sides.length; k++) {
      const i = (k + round) % sides.length;
      const m = await timed(() => workload(sides[i], round));
      totals[i].seconds += m.seconds;
      totals[i].cpuSeconds += m.cpuSeconds;
      totals[i].events += m.events;
      roundRates[i] = rate(m);
    }
    for (let i = 0; i < sides.length; i++) ratios[i].push(roundRates[i] / roundRates[0]);
  }
  return { totals, medianRatios: ratios.map(median) };
}

function report(title: string, sides: Side[], { totals, medianRatios }: Comparison): void {
  const base = rate(totals[0]);
  console.log(`\n${title}`);
  for (let i = 0; i < sides.length; i++) {
    const r = rate(totals[i]);
    const perEvent = (totals[i].seconds / totals[i].events) * 1e6;
    const cpuPerEvent = (totals[i].cpuSeconds / totals[i].events) * 1e6;
    console.log(
      `  ${sides[i].name.padEnd(36)} ${fmt(r).padStart(9)} events/s  ${perEvent.toFixed(1).padStart(7)} us/event` +
        `  cpu ${cpuPerEvent.toFixed(1).padStart(6)} us/event` +
        (i === 0
          ? '  (baseline)'
          : `  ratio ${(r / base).toFixed(2)}x raw overall, ${medianRatios[i].toFixed(2)}x median of ${ROUNDS} rounds`),
    );
  }
}

async function open(dir: string, file: string): Promise<SqliteHandle> {
  const handle = openSqlite({ path: join(dir, file), synchronous: SYNCHRONOUS });
  await migrateToLatest(handle.db);
  return handle;
}

/**
 * `appenders` writers on streams of their own, one event per append, each awaiting its last:
 * events/s, and the longest the event loop was held meanwhile (an fsync on the main thread holds it).
 */
async function concurrentRate(
  store: EventStore,
  appenders: number,
  tag: string,
): Promise<{ rate: number; maxLoopDelayMs: number }> {
  const each = Math.max(1, Math.floor(CONCURRENT_EVENTS / appenders));
  const loop = monitorEventLoopDelay({ resolution: 1 });
  loop.enable();
  const t0 = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: appenders }, async (_, a) => {
      for (let i = 0; i < each; i++) await store.append(`${tag}_${a}`, [chunkEvent(i)], { expected: i });
    }),
  );
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  loop.disable();
  return { rate: (appenders * each) / seconds, maxLoopDelayMs: loop.max / 1e6 };
}

async function concurrentAppenders(dir: string): Promise<void> {
  const perAppend = await open(dir, 'per-append.db');
  const grouped = await open(dir, 'grouped.db');
  const threaded = await open(dir, 'threaded.db');
  const sides = [
    {
      name: 'one transaction per append',
      store: new SqliteEventStore(perAppend, { groupCommit: { maxBatch: 1 } }),
    },
    { name: 'group commit', store: new SqliteEventStore(grouped) },
    { name: 'group commit, writer thread', store: new SqliteEventStore(threaded, { writerThread: {} }) },
  ];
  // the thread is started (and, from TypeScript sources, compiled) before anything is timed
  await sides[2].store.append('warm-up', [chunkEvent(0)], { expected: 'no_stream' });
  console.log(
    `\nconcurrent appenders, one event per append, synchronous=${SYNCHRONOUS}, ~${CONCURRENT_EVENTS} events per measurement, ` +
      `median of ${CONCURRENT_ROUNDS} alternating rounds`,
  );
  for (const appenders of APPENDERS) {
    const rates: number[][] = sides.map(() => []);
    const ratios: number[][] = sides.map(() => []);
    const commits: number[] = sides.map(() => 0);
    const loopDelays: number[][] = sides.map(() => []);
    for (let round = 0; round < CONCURRENT_ROUNDS; round++) {
      const roundRates: number[] = [];
      for (let k = 0; k < sides.length; k++) {
        const i = (k + round) % sides.length;
        const before = sides[i].store.commitStats().commits;
        const m = await concurrentRate(sides[i].store, appenders, `c${appenders}_${round}`);
        roundRates[i] = m.rate;
        loopDelays[i].push(m.maxLoopDelayMs);
        commits[i] += sides[i].store.commitStats().commits - before;
        rates[i].push(roundRates[i]);
      }
      for (let i = 0; i < sides.length; i++) ratios[i].push(roundRates[i] / roundRates[0]);
    }
    console.log(`  ${appenders} appender${appenders === 1 ? '' : 's'}:`);
    sides.forEach((side, i) =>
      console.log(
        `    ${side.name.padEnd(28)} ${fmt(median(rates[i])).padStart(7)} events/s  ` +
          `${(commits[i] / CONCURRENT_ROUNDS).toFixed(0).padStart(5)} commits per run  ` +
          `event loop held up to ${median(loopDelays[i]).toFixed(1).padStart(5)} ms` +
          (i === 0
            ? '  (baseline)'
            : `  ratio ${median(ratios[i]).toFixed(2)}x (median of per-round ratios)`),
      ),
    );
  }
  for (const side of sides) await side.store.close();
  await perAppend.close();
  await grouped.close();
  await threaded.close();
}

/** Commits of one 7-step task (a chain of seven echo tool steps), against the one commit per event it used to cost. */
async function commitsPerTask(dir: string): Promise<void> {
  console.log('\ncommits (= fsyncs at FULL) per 7-step task');
  for (const on of [false, true]) {
    const taskDir = mkdtempSync(join(dir, 'task-'));
    const opened = await openSqliteWithMemory(taskDir);
    try {
      const rt = await startTestRuntime({
        store: opened.store,
        tools: testToolRegistry(taskDir),
        permissions: new RuleTablePolicy({}),
        model: new ScriptedBackend({
          orchestrator: [SEVEN_STEP_PLAN, '{"type":"respond","content":"done"}'],
        }),
        hooks: on ? [createCriticMemoryHook({ critic: new HeuristicCritic(), memory: opened.memory })] : [],
        guards: on ? [createMemoryEndGuard(opened.memory)] : [],
      });
      const before = opened.store.commitStats().commits;
      const { task_id } = await rt.runtime.submit({ input: 'seven steps' }, { source: 'cli' });
      const settled = await rt.runtime.settled(task_id);
      await rt.close();
      if (settled.final?.stop_reason !== 'completed') throw new Error('the 7-step task did not complete');
      const commits = opened.store.commitStats().commits - before;
      const events = (await opened.store.readWholeStream(task_id)).length;
      console.log(
        `  critic and memory ${on ? 'on ' : 'off'}: ${commits} commits for ${events} events ` +
          `(one commit per event: ${events}; ratio ${(events / commits).toFixed(2)}x fewer)`,
      );
    } finally {
      await opened.close();
    }
  }
}

export async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'runledger-bench-'));
  try {
    await concurrentAppenders(dir);
    await commitsPerTask(dir);
    const rawHandle = await open(dir, 'raw.db');
    const storeHandle = await open(dir, 'store.db');
    const sides: Side[] = [
      rawSide(rawHandle),
      storeSide('SqliteEventStore', new SqliteEventStore(storeHandle), () => storeHandle.close()),
    ];
    if (WITH_PROJECTION) {
      const storage = await createSqliteStorage({
        path: join(dir, 'projected.db'),
        synchronous: SYNCHRONOUS,
      });
      sides.push(storeSide('SqliteEventStore + tasks projection', storage.eventStore, () => storage.close()));
    }
    const perRound = Math.floor(EVENTS / ROUNDS);
    const streams = Math.max(1, Math.floor(perRound / STREAM_LEN));
    console.log(
      `SqliteEventStore vs raw better-sqlite3: ${fmt(perRound * ROUNDS)} events per workload, streams of ${STREAM_LEN}, ` +
        `~${JSON.stringify(chunkPayload(0)).length}-byte payloads, synchronous=${SYNCHRONOUS}, WAL, ${ROUNDS} alternating rounds, node ${process.version}`,
    );

    const single = await compare(sides, async (side, round) => {
      for (let s = 0; s < streams; s++) await side.append(`single_${round}_${s}`, 0, STREAM_LEN, 1);
      return streams * STREAM_LEN;
    });
    report('append, one event per transaction', sides, single);

    const batched = await compare(sides, async (side, round) => {
      for (let s = 0; s < streams; s++) await side.append(`batch_${round}_${s}`, 0, STREAM_LEN, 100);
      return streams * STREAM_LEN;
    });
    report('append, batches of 100 events per transaction', sides, batched);

    const reads = await compare(sides, async (side, round) => {
      let n = 0;
      for (let s = 0; s < streams; s++) n += await side.readStream(`batch_${round}_${s}`);
      return n;
    });
    report('read back whole streams', sides, reads);

    for (const side of sides) await side.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  await postgresMain();
}
