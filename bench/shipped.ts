/**
 * npm run bench -- shipped (and the first part of `npm run bench` without names)
 * The service as `npm start` ships it, against its peers, in one run:
 *   - the 7-step task: the scripted orchestrator (RUNLEDGER_MODEL=scripted:<file>) answers a plan of 7
 *     chained `file_read` steps of a 12-byte file, then responds. Runledger is the build's own
 *     composition (dist/: startApp over loadConfig, default settings, RUNLEDGER_SANDBOX=process, the real
 *     file_read plugin), driven through its RuntimeController in this process, critic and memory off
 *     (RUNLEDGER_CRITIC=off, RUNLEDGER_MEMORY=off) and on (the defaults); LangGraph.js a 7-node chain
 *     doing the same reads with SqliteSaver as it comes, and again at synchronous=FULL with durability
 *     "sync". 1 and 16 tasks at a time, each side a closed loop of that many clients; medians of
 *     BENCH_SHIPPED_RUNS alternating runs; CPU is this process's (all its threads) per task.
 *   - CPU per tool step: the Runledger task's CPU over its 7 steps.
 *   - the event store the service appends through (SQLite: createSqliteStorage with the writer thread while appenders are concurrent, as
 *     the server opens it; PostgreSQL: PgEventStore) against raw better-sqlite3 / raw pg on the same schema
 *     and pragmas: one event per append from one appender, and 16 concurrent appenders (raw: one
 *     transaction for the inserts that arrive in one tick of the event loop).
 * Each figure is printed with its ratio and target and kept for the summary (recordFigure).
 * Env: BENCH_SHIPPED_RUNS (3), BENCH_SHIPPED_TASKS (40 a run at 1 at a time, 4x that at 16),
 * BENCH_BUILD (on: `npm run build` first; off: use dist/ as it is), BENCH_STORE_EVENTS (2000),
 * BENCH_PG_URL (else RUNLEDGER_TEST_PG_URL, else the local server), BENCH_SHIPPED_PARTS (`tasks`,
 * `stores` or both, comma-separated: which half runs; both by default).
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Annotation, END, START, StateGraph } from '@langchain/langgraph';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import type BetterSqlite3 from 'better-sqlite3';
import { chunkEvent, fmt, median, rawChunkRow, recordFigure } from './bench-support';
import { admin } from './event-store-pg';

const ROOT = resolve(__dirname, '..');
const RUNS = Number(process.env.BENCH_SHIPPED_RUNS ?? 3);
const TASKS = Number(process.env.BENCH_SHIPPED_TASKS ?? 40);
const STORE_EVENTS = Number(process.env.BENCH_STORE_EVENTS ?? 2000);
const PG_URL =
  process.env.BENCH_PG_URL ??
  process.env.RUNLEDGER_TEST_PG_URL ??
  'postgres://runledger:runledger@localhost:5432/runledger';
const PARTS = new Set((process.env.BENCH_SHIPPED_PARTS ?? 'tasks,stores').split(',').map((p) => p.trim()));
const STEPS = 7;
const FILE = 'twelve.txt';
const FILE_TEXT = 'twelve bytes';
const APPENDERS = 16;
/** how long a booted Runledger is left alone before its first (warm-up) task */
const BOOT_SETTLE_MS = 3000;

/** A module of the build, as `npm start` loads it. */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const built = <T>(path: string): T => require(join(ROOT, 'dist', path)) as T;

const PLAN = {
  type: 'plan',
  steps: Array.from({ length: STEPS }, (_, i) => ({
    id: `s${i + 1}`,
    kind: 'tool',
    tool: 'file_read',
    args: { path: FILE },
    depends_on: i === 0 ? [] : [`s${i}`],
  })),
};
const RESPOND = { type: 'respond', content: 'seven reads done' };

interface Side {
  /** submissions refused so far (each sent again after its Retry-After) */
  readonly refused?: number;
  /** the store's commits so far (transactions: with a writer thread, round trips to it among them) */
  commits?(): { commits: number; transactions: number; threadGroups: number };
  /** runs `tasks` tasks, `concurrency` clients each running one after the other */
  run(tasks: number, concurrency: number): Promise<void>;
  close(): Promise<void>;
}

interface Measured {
  tasksPerSecond: number;
  cpuMsPerTask: number;
  /** submissions refused during the run */
  refused: number;
  /** per task, when the side counts them */
  commitsPerTask: number | null;
  transactionsPerTask: number | null;
  /** share of the transactions the writer thread ran (the rest were committed on the main thread) */
  threadShare: number | null;
  /**
   * share of the run's wall time the main thread's event loop was busy (the side's work and its
   * clients', which run in this process): near 1, the side is bound by one thread's CPU
   */
  loopBusy: number;
}

async function measure(side: Side, tasks: number, concurrency: number): Promise<Measured> {
  const refusedBefore = side.refused ?? 0;
  const commitsBefore = side.commits?.();
  const cpu = process.cpuUsage();
  const loop = performance.eventLoopUtilization();
  const started = performance.now();
  await side.run(tasks, concurrency);
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  const loopBusy = performance.eventLoopUtilization(loop).utilization;
  const commitsAfter = side.commits?.();
  const delta = (k: 'commits' | 'transactions' | 'threadGroups') =>
    commitsBefore && commitsAfter ? commitsAfter[k] - commitsBefore[k] : null;
  const transactions = delta('transactions');
  return {
    tasksPerSecond: tasks / seconds,
    cpuMsPerTask: (used.user + used.system) / 1000 / tasks,
    refused: (side.refused ?? 0) - refusedBefore,
    commitsPerTask: commitsBefore ? delta('commits')! / tasks : null,
    transactionsPerTask: transactions === null ? null : transactions / tasks,
    threadShare: transactions ? delta('threadGroups')! / transactions : null,
    loopBusy,
  };
}

/** `concurrency` clients taking task numbers until `tasks` are done. */
async function clients(tasks: number, concurrency: number, one: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < tasks; i = next++) await one(i);
    }),
  );
}

interface StoreFacade {
  inner?: StoreFacade;
  commitStats?(): { commits: number; transactions: number };
  threadGroups?(): number;
}

/** The SQLite store under the stores that wrap it (redaction), for its commit counts. */
function sqliteStoreOf(store: StoreFacade): StoreFacade | null {
  for (let s: StoreFacade | undefined = store; s; s = s.inner) if (s.commitStats) return s;
  return null;
}

interface RuntimeFacade {
  submit(input: { input: string }, options: { source: string }): Promise<{ task_id: string }>;
  settled(taskId: string): Promise<{ final?: { stop_reason: string; detail?: string } | null }>;
}

/** The build's composition as `npm start` boots it, over a fresh data folder. */
async function runledger(criticAndMemory: boolean): Promise<Side> {
  const dir = mkdtempSync(join(tmpdir(), 'rl-bench-shipped-'));
  const workspace = join(dir, 'workspace');
  mkdirSync(workspace);
  writeFileSync(join(workspace, FILE), FILE_TEXT);
  const script = join(dir, 'script.json');
  writeFileSync(script, JSON.stringify({ orchestrator: [JSON.stringify(PLAN), JSON.stringify(RESPOND)] }));
  const { loadConfig } = built<{ loadConfig(env: NodeJS.ProcessEnv): unknown }>(
    'apps/controller/src/config.js',
  );
  const { startApp } = built<{
    startApp(config: unknown): Promise<{ app: { get<T>(token: unknown): T }; close(): Promise<void> }>;
  }>('apps/controller/src/app.js');
  const { RuntimeController } = built<{ RuntimeController: unknown }>('libs/runtime/src/index.js');
  const { EventStore } = built<{ EventStore: unknown }>('libs/event-store/src/index.js');
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    RUNLEDGER_DATA_DIR: join(dir, 'data'),
    RUNLEDGER_DB: join(dir, 'data', 'runledger.db'),
    RUNLEDGER_ALLOWED_ROOT: workspace,
    RUNLEDGER_ADMIN_TOKEN: 'bench-admin-token-0123456789abcdef',
    RUNLEDGER_MODEL: `scripted:${script}`,
    RUNLEDGER_SANDBOX: 'process',
    ...(criticAndMemory ? {} : { RUNLEDGER_CRITIC: 'off', RUNLEDGER_MEMORY: 'off' }),
  };
  let refused = 0;
  const started = await startApp(loadConfig(env));
  const runtime = started.app.get<RuntimeFacade>(RuntimeController);
  const store = sqliteStoreOf(started.app.get<StoreFacade>(EventStore));
  // a server is measured running, not booting: the writer thread loads and compiles its modules and the
  // process finishes its start-up work for a moment after startApp resolves, on CPU this process counts
  await sleep(BOOT_SETTLE_MS);
  /** a refused submission is sent again after its Retry-After, as an HTTP client is told to */
  const submit = async (input: string): Promise<{ task_id: string }> => {
    for (;;) {
      try {
        return await runtime.submit({ input }, { source: 'api' });
      } catch (err) {
        const retryAfter = (err as { retryAfterSeconds?: number }).retryAfterSeconds;
        if (retryAfter === undefined) throw err;
        refused++;
        await sleep(retryAfter * 1000);
      }
    }
  };
  return {
    get refused() {
      return refused;
    },
    commits: () => ({
      ...(store?.commitStats?.() ?? { commits: 0, transactions: 0 }),
      threadGroups: store?.threadGroups?.() ?? 0,
    }),
    run: (tasks, concurrency) =>
      clients(tasks, concurrency, async (i) => {
        const { task_id } = await submit(`seven reads, task ${i}`);
        const p = await runtime.settled(task_id);
        if (p.final?.stop_reason !== 'completed')
          throw new Error(`a Runledger task stopped with ${p.final?.stop_reason}: ${p.final?.detail}`);
      }),
    close: async () => {
      await started.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const ChainState = Annotation.Root({
  input: Annotation<string>,
  outputs: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

/** LangGraph.js: 7 nodes in a chain, each reading the file, checkpointed by SqliteSaver. */
function langgraph(full: boolean): Side {
  const dir = mkdtempSync(join(tmpdir(), 'rl-bench-shipped-lg-'));
  const file = join(dir, FILE);
  writeFileSync(file, FILE_TEXT);
  const saver = SqliteSaver.fromConnString(join(dir, 'langgraph.db'));
  if (full) (saver.db as BetterSqlite3.Database).pragma('synchronous = FULL');
  let builder = new StateGraph(ChainState);
  for (let i = 0; i < STEPS; i++)
    builder = builder.addNode(`s${i + 1}`, async () => ({
      outputs: [await readFile(file, 'utf8')],
    })) as unknown as typeof builder;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const edges = builder as any;
  edges.addEdge(START, 's1');
  for (let i = 1; i < STEPS; i++) edges.addEdge(`s${i}`, `s${i + 1}`);
  edges.addEdge(`s${STEPS}`, END);
  const graph = builder.compile({ checkpointer: saver });
  let thread = 0;
  return {
    run: (tasks, concurrency) =>
      clients(tasks, concurrency, async (i) => {
        const out = await graph.invoke(
          { input: `seven reads, task ${i}` },
          { configurable: { thread_id: `task_${thread++}` }, ...(full ? { durability: 'sync' } : {}) },
        );
        if (out.outputs.length !== STEPS || out.outputs[STEPS - 1] !== FILE_TEXT)
          throw new Error('a LangGraph task read something else');
      }),
    close: async () => {
      saver.db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

interface TaskTarget {
  concurrency: number;
  criticAndMemory: boolean;
  /** least ratio to LangGraph at its defaults */
  target: number;
}

const TASK_TARGETS: TaskTarget[] = [
  { criticAndMemory: false, concurrency: 1, target: 1.0 },
  { criticAndMemory: false, concurrency: 16, target: 2.0 },
  { criticAndMemory: true, concurrency: 1, target: 0.7 },
  { criticAndMemory: true, concurrency: 16, target: 1.5 },
];

async function sevenStepTask(): Promise<void> {
  console.log(
    `7-step task (plan of ${STEPS} chained file_read steps of a ${FILE_TEXT.length}-byte file, then respond): ` +
      `Runledger's build as npm start composes it (defaults, RUNLEDGER_SANDBOX=process, SQLite FULL), ` +
      `LangGraph.js ${STEPS}-node chain with SqliteSaver; medians of ${RUNS} alternating runs, ` +
      `${TASKS} tasks a run at 1 at a time, ${TASKS * 4} at 16`,
  );
  let cpuPerStep: number[] = [];
  for (const criticAndMemory of [false, true]) {
    const ours = await runledger(criticAndMemory);
    const peers = { defaults: langgraph(false), full: langgraph(true) };
    try {
      // warm-up, not reported: every side compiles its hot paths on its first tasks
      await ours.run(16, 4);
      await peers.defaults.run(16, 4);
      await peers.full.run(16, 4);
      for (const { concurrency, target } of TASK_TARGETS.filter(
        (t) => t.criticAndMemory === criticAndMemory,
      )) {
        const tasks = concurrency === 1 ? TASKS : TASKS * 4;
        const runs: Array<{ ours: Measured; defaults: Measured; full: Measured }> = [];
        for (let r = 0; r < RUNS; r++)
          runs.push({
            ours: await measure(ours, tasks, concurrency),
            defaults: await measure(peers.defaults, tasks, concurrency),
            full: await measure(peers.full, tasks, concurrency),
          });
        const of = (pick: (m: (typeof runs)[number]) => number) => median(runs.map(pick));
        const rate = of((m) => m.ours.tasksPerSecond);
        const base = of((m) => m.defaults.tasksPerSecond);
        const fullRate = of((m) => m.full.tasksPerSecond);
        const ratio = of((m) => m.ours.tasksPerSecond / m.defaults.tasksPerSecond);
        const name = `7-step task, critic+memory ${criticAndMemory ? 'on' : 'off'}, ${concurrency} at a time`;
        console.log(
          `  ${name}: Runledger ${fmt(rate, 1)} tasks/s (CPU ${fmt(
            of((m) => m.ours.cpuMsPerTask),
            1,
          )} ms/task), ` +
            `LangGraph defaults ${fmt(base, 1)} tasks/s (CPU ${fmt(
              of((m) => m.defaults.cpuMsPerTask),
              1,
            )} ms/task), ` +
            `LangGraph FULL + durability sync ${fmt(fullRate, 1)} tasks/s; ` +
            `ratio ${fmt(ratio, 2)}x (target >= ${target}x), ${fmt(
              of((m) => m.ours.tasksPerSecond / m.full.tasksPerSecond),
              2,
            )}x against FULL + sync; ` +
            `Runledger refused ${runs.map((m) => m.ours.refused).join(' / ')} submissions (each sent again after its Retry-After); ` +
            `Runledger per task: ${fmt(
              of((m) => m.ours.commitsPerTask ?? 0),
              2,
            )} commits, ${fmt(
              of((m) => m.ours.transactionsPerTask ?? 0),
              2,
            )} transactions, ${fmt(100 * of((m) => m.ours.threadShare ?? 0), 0)}% of them on the writer thread; ` +
            `main thread busy ${fmt(100 * of((m) => m.ours.loopBusy), 0)}% of the run (LangGraph defaults ${fmt(
              100 * of((m) => m.defaults.loopBusy),
              0,
            )}%)`,
        );
        recordFigure({
          figure: `${name}, vs LangGraph defaults`,
          value: `${fmt(rate, 1)} vs ${fmt(base, 1)} tasks/s`,
          ratio,
          target: `>= ${target}x`,
          met: ratio >= target,
        });
        recordFigure({
          figure: `${name}, vs LangGraph FULL + sync`,
          value: `${fmt(rate, 1)} vs ${fmt(fullRate, 1)} tasks/s`,
          ratio: of((m) => m.ours.tasksPerSecond / m.full.tasksPerSecond),
          target: 'reported',
          met: true,
        });
        if (!criticAndMemory && concurrency === 1) cpuPerStep = runs.map((m) => m.ours.cpuMsPerTask / STEPS);
      }
    } finally {
      await ours.close();
      await peers.defaults.close();
      await peers.full.close();
    }
  }
  const perStep = median(cpuPerStep);
  console.log(
    `  CPU per tool step (critic+memory off, 1 at a time, the task's CPU over its ${STEPS} steps): ${fmt(perStep, 2)} ms (target <= 1 ms)`,
  );
  recordFigure({
    figure: 'CPU per tool step, shipped composition',
    value: `${fmt(perStep, 2)} ms`,
    ratio: null,
    target: '<= 1 ms',
    met: perStep <= 1,
  });
}

/** Appends one event per call: `append(stream, sequence)` resolves once that event is durable. */
interface Appender {
  name: string;
  append(stream: string, sequence: number): Promise<void>;
  /** a store's commits so far (SqliteEventStore.commitStats) and the groups its writer thread committed */
  grouping?(): { appends: number; commits: number; threadGroups: number };
}

/**
 * The store, raw inserts one transaction each, raw inserts one transaction per tick of the event loop,
 * and stores measured in the same rounds for comparison only (no target).
 */
interface AppendSides {
  store: Appender;
  raw: Appender;
  rawPerTick: Appender;
  compared?: Appender[];
  close(): Promise<void>;
}

/** events/s of `appenders` appenders on streams of their own, each awaiting its last append */
async function appendRate(side: Appender, appenders: number, tag: string): Promise<number> {
  const each = Math.max(1, Math.floor(STORE_EVENTS / appenders));
  const started = performance.now();
  await Promise.all(
    Array.from({ length: appenders }, async (_, a) => {
      for (let s = 1; s <= each; s++) await side.append(`${tag}_${a}`, s);
    }),
  );
  return (each * appenders) / ((performance.now() - started) / 1000);
}

interface Pending {
  row: unknown[];
  done: () => void;
  failed: (e: unknown) => void;
}

/** Inserts gathered over one tick of the event loop and run by `flush` as one transaction. */
function batchPerTick(flush: (rows: unknown[][]) => Promise<void> | void) {
  let batch: Pending[] | null = null;
  const commit = (mine: Pending[]) => {
    batch = null;
    Promise.resolve()
      .then(() => flush(mine.map((m) => m.row)))
      .then(
        () => mine.forEach((m) => m.done()),
        (e: unknown) => mine.forEach((m) => m.failed(e)),
      );
  };
  return (row: unknown[]) =>
    new Promise<void>((done, failed) => {
      if (!batch) {
        const mine: Pending[] = [];
        batch = mine;
        setImmediate(() => commit(mine));
      }
      batch.push({ row, done, failed });
    });
}

const INSERT_COLUMNS =
  'event_id, task_id, session_id, sequence, type, payload, causation_id, correlation_id, created_at';

interface SqliteHandleLike {
  raw: BetterSqlite3.Database;
  db: unknown;
  close(): Promise<void>;
}
interface EventStoreLike {
  append(stream: string, events: unknown[], options: { expected: number | 'no_stream' }): Promise<unknown>;
  ready?(): Promise<void>;
  close(): Promise<void>;
  commitStats?(): { appends: number; commits: number };
  threadGroups?(): number;
}

/** One event per append through `store`, awaiting its durability. */
function storeAppender(name: string, store: EventStoreLike): Appender {
  return {
    name,
    append: async (stream, s) => {
      await store.append(stream, [chunkEvent(s)], { expected: s === 1 ? 'no_stream' : s - 1 });
    },
    grouping: () => ({
      appends: store.commitStats?.().appends ?? 0,
      commits: store.commitStats?.().commits ?? 0,
      threadGroups: store.threadGroups?.() ?? 0,
    }),
  };
}

async function sqliteSides(dir: string): Promise<AppendSides> {
  const { openSqlite } = built<{
    openSqlite(o: { path: string; synchronous: string }): SqliteHandleLike;
  }>('libs/event-store/src/index.js');
  const { migrateToLatest } = built<{ migrateToLatest(db: unknown): Promise<unknown> }>(
    'migrations/index.js',
  );
  const { createSqliteStorage } = built<{
    createSqliteStorage(o: {
      path: string;
      synchronous: string;
      writerThread: boolean | 'while_concurrent';
    }): Promise<{ eventStore: EventStoreLike; close(): Promise<void> }>;
  }>('libs/state-store/src/index.js');
  const handle = openSqlite({ path: join(dir, 'raw.db'), synchronous: 'FULL' });
  await migrateToLatest(handle.db);
  // the connection runs at NORMAL and the store's appends at FULL (connectionSynchronous): raw inserts commit as appends do
  handle.raw.pragma('synchronous = FULL');
  const insert = handle.raw.prepare(
    `INSERT INTO events (${INSERT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const insertAll = handle.raw.transaction((rows: unknown[][]) => {
    for (const row of rows) insert.run(...row);
  });
  const tick = batchPerTick((rows) => insertAll.immediate(rows));
  const storage = await createSqliteStorage({
    path: join(dir, 'store.db'),
    synchronous: 'FULL',
    writerThread: 'while_concurrent',
  });
  await storage.eventStore.ready?.();
  // RUNLEDGER_SQLITE_WRITER_THREAD=off: every group commits on the event loop's own connection
  const inline = await createSqliteStorage({
    path: join(dir, 'store-inline.db'),
    synchronous: 'FULL',
    writerThread: false,
  });
  return {
    raw: {
      name: 'raw better-sqlite3',
      append: async (stream, s) => {
        insertAll.immediate([rawChunkRow(stream, s, new Date().toISOString())]);
      },
    },
    rawPerTick: {
      name: 'raw better-sqlite3, a transaction per tick',
      append: (stream, s) => tick(rawChunkRow(stream, s, new Date().toISOString())),
    },
    store: storeAppender(
      'SqliteEventStore (writer thread while concurrent, as the server opens it)',
      storage.eventStore,
    ),
    compared: [storeAppender('SqliteEventStore, writer thread off', inline.eventStore)],
    close: async () => {
      await storage.close();
      await inline.close();
      await handle.close();
    },
  };
}

interface PgHandleLike {
  pool: import('pg').Pool;
  db: unknown;
  schema: string;
  close(): Promise<void>;
}

async function pgSides(url: string): Promise<AppendSides> {
  const { openPostgres, PgEventStore } = built<{
    openPostgres(o: { url: string; schema: string; maxConnections: number }): PgHandleLike;
    PgEventStore: new (h: PgHandleLike) => EventStoreLike;
  }>('libs/event-store/src/index.js');
  const { migrateToLatest } = built<{ migrateToLatest(db: unknown): Promise<unknown> }>(
    'migrations/index.js',
  );
  const rawHandle = openPostgres({ url, schema: 'raw', maxConnections: APPENDERS + 2 });
  const storeHandle = openPostgres({ url, schema: 'store', maxConnections: APPENDERS + 2 });
  for (const h of [rawHandle, storeHandle]) {
    await admin(url, `CREATE SCHEMA ${h.schema}`);
    await migrateToLatest(h.db);
  }
  const insertRows = async (rows: unknown[][]) => {
    const client = await rawHandle.pool.connect();
    try {
      await client.query('BEGIN');
      const values = rows
        .map((_, r) => `(${Array.from({ length: 9 }, (_, c) => `$${r * 9 + c + 1}`).join(', ')})`)
        .join(', ');
      await client.query(`INSERT INTO events (${INSERT_COLUMNS}) VALUES ${values}`, rows.flat());
      await client.query('COMMIT');
    } finally {
      client.release();
    }
  };
  const tick = batchPerTick(insertRows);
  const store = new PgEventStore(storeHandle);
  return {
    raw: {
      name: 'raw pg (BEGIN, INSERT, COMMIT)',
      append: (stream, s) => insertRows([rawChunkRow(stream, s, new Date().toISOString())]),
    },
    rawPerTick: {
      name: 'raw pg, a transaction per tick',
      append: (stream, s) => tick(rawChunkRow(stream, s, new Date().toISOString())),
    },
    store: {
      name: 'PgEventStore',
      append: async (stream, s) => {
        await store.append(stream, [chunkEvent(s)], { expected: s === 1 ? 'no_stream' : s - 1 });
      },
    },
    close: async () => {
      await store.close();
      await rawHandle.close();
      await storeHandle.close();
    },
  };
}

/** One appender against raw, then APPENDERS at once against raw with a transaction per tick, alternating over RUNS rounds. */
async function compareAppends(label: string, sides: AppendSides): Promise<void> {
  for (const [appenders, target] of [
    [1, 0.7],
    [APPENDERS, 0.8],
  ] as const) {
    const baseline = appenders === 1 ? sides.raw : sides.rawPerTick;
    const stores = [sides.store, ...(sides.compared ?? [])];
    const ratios = stores.map(() => [] as number[]);
    const rates = { raw: [] as number[], stores: stores.map(() => [] as number[]) };
    const before = stores.map((s) => s.grouping?.());
    for (let r = 0; r < RUNS; r++) {
      const tag = `a${appenders}_${r}_${randomBytes(3).toString('hex')}`;
      // which side goes first alternates by round: a round's first measurement runs on a colder process
      const rawFirst = r % 2 === 1;
      const rawBefore = rawFirst ? await appendRate(baseline, appenders, `${tag}_r`) : null;
      const measured: number[] = [];
      for (const [i, store] of stores.entries())
        measured.push(await appendRate(store, appenders, `${tag}_s${i}`));
      const raw = rawBefore ?? (await appendRate(baseline, appenders, `${tag}_r`));
      rates.raw.push(raw);
      measured.forEach((rate, i) => {
        rates.stores[i].push(rate);
        ratios[i].push(rate / raw);
      });
    }
    const name =
      appenders === 1
        ? `${label}, 1 event per append, 1 appender`
        : `${label}, 1 event per append, ${appenders} concurrent appenders`;
    for (const [i, store] of stores.entries()) {
      const ratio = median(ratios[i]);
      const rate = median(rates.stores[i]);
      const compared = i > 0;
      const start = before[i];
      const end = store.grouping?.();
      const grouping =
        start && end
          ? `, ${fmt((end.appends - start.appends) / Math.max(1, end.commits - start.commits), 1)} appends a commit, ` +
            `${fmt((100 * (end.threadGroups - start.threadGroups)) / Math.max(1, end.commits - start.commits), 0)}% of the commits on the writer thread`
          : '';
      console.log(
        `  ${name}: ${store.name} ${fmt(rate)} events/s, ${baseline.name} ${fmt(median(rates.raw))} events/s, ` +
          `ratio ${fmt(ratio, 2)}x (${compared ? 'for comparison' : `target >= ${target}x`})${grouping}`,
      );
      recordFigure({
        figure: compared ? `${name}, ${store.name}` : name,
        value: `${fmt(rate)} vs ${fmt(median(rates.raw))} events/s`,
        ratio,
        target: compared ? 'reported' : `>= ${target}x`,
        met: compared || ratio >= target,
      });
    }
  }
  await sides.close();
}

async function eventStores(): Promise<void> {
  console.log(
    `event store the service appends through against raw inserts, same schema and pragmas, ~${JSON.stringify(chunkEvent(0).payload).length}-byte payloads, ` +
      `${fmt(STORE_EVENTS)} events a measurement, medians of ${RUNS} alternating rounds`,
  );
  const dir = mkdtempSync(join(tmpdir(), 'rl-bench-shipped-store-'));
  try {
    await compareAppends('SQLite FULL', await sqliteSides(dir));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const database = `rl_bench_${process.pid}_${randomBytes(3).toString('hex')}`;
  try {
    await admin(PG_URL, `CREATE DATABASE ${database}`);
  } catch (err) {
    console.log(
      `  PostgreSQL skipped: cannot reach the server (${(err as Error).message}); set BENCH_PG_URL`,
    );
    recordFigure({
      figure: 'PostgreSQL event store',
      value: 'not measured',
      ratio: null,
      target: 'reachable',
      met: false,
    });
    return;
  }
  const url = new URL(PG_URL);
  url.pathname = `/${database}`;
  try {
    await compareAppends('PostgreSQL', await pgSides(url.toString()));
  } finally {
    await admin(PG_URL, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  }
}

export async function main(): Promise<void> {
  if ((process.env.BENCH_BUILD ?? 'on') !== 'off') {
    console.log('npm run build (BENCH_BUILD=off uses dist/ as it is)');
    execFileSync('npm', ['run', 'build'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
    // the benches after this one in the same run use this build
    process.env.BENCH_BUILD = 'off';
  }
  const unknown = [...PARTS].filter((part) => part !== 'tasks' && part !== 'stores');
  if (unknown.length > 0)
    throw new Error(`BENCH_SHIPPED_PARTS: unknown part ${unknown.join(', ')} (tasks, stores)`);
  if (PARTS.has('tasks')) await sevenStepTask();
  if (PARTS.has('stores')) await eventStores();
}
