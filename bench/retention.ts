/**
 * npm run bench -- retention
 * A log that lives for years, measured in one run, each figure beside its baseline
 * (BENCH_RETENTION_PARTS picks parts: reads, growth, alone, sweeper):
 *   1. growth: a simulated month of traffic (BENCH_RETENTION_TASKS_PER_DAY tasks a day, 2000; a mix
 *      of short tasks and long ones with tool output) appended day after day with a 7-day policy (the
 *      archiver and the space reclaiming run at each day's end) against the same month without one,
 *      on SQLite and on PostgreSQL (BENCH_RETENTION_PG_TASKS_PER_DAY, a quarter of SQLite's; 0 skips
 *      it; BENCH_PG_URL), the policy's catalog after BENCH_RETENTION_CATALOG_AFTER (7d). Prints the
 *      live size per day (the curve), the archive's and the catalog's sizes, the growth per day over
 *      the last 10 days, and the live database by table and index.
 *   2. the sweeper alone on a month of finished tasks (BENCH_RETENTION_SWEEP_SECONDS): tasks archived
 *      per second and this process's event-loop delay with the archiver on the event loop, in its
 *      worker thread, and with no sweeper.
 *   3. the sweeper under load: POST /tasks paced open loop (BENCH_RETENTION_RATE req/s for
 *      BENCH_RETENTION_SECONDS) against the controller in a child process whose database holds a
 *      month of finished tasks, with the in-server sweeper moving them meanwhile, against the same
 *      server and data without a policy: p50/p99 latency, tasks finished per second and the server's
 *      event-loop delay (BENCH_RETENTION_WRITER_THREAD sets RUNLEDGER_SQLITE_WRITER_THREAD). The two
 *      servers run alternately, BENCH_RETENTION_ROUNDS times each (2), each on a fresh copy of the
 *      seed (BENCH_RETENTION_SEED_TASKS finished tasks, 20,000), and the ratios are of the medians.
 *      Part `sweeper-pg` does the same on PostgreSQL (BENCH_PG_URL): a seeded database
 *      (BENCH_RETENTION_PG_SEED_TASKS, 6,000) copied per run with CREATE DATABASE ... TEMPLATE, the
 *      sweeper on the server's pool.
 *   4. reading an archived task against a live one (the event store's readWholeStream): cold
 *      (a segment not read before) and warm.
 * Erasure is another module's; it is not measured here.
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { NewEvent } from '@runledger/contracts';
import { catalogFile, segmentFolder } from '@runledger/event-store';
import {
  RetentionSweeper,
  SqliteStorage,
  Storage,
  ThreadArchiver,
  createPostgresStorage,
  createSqliteStorage,
  openSqliteArchiver,
  parseRetention,
  postgresArchiver,
} from '@runledger/state-store';
import BetterSqlite3 from 'better-sqlite3';
import { sql } from 'kysely';
import { Client } from 'pg';
// the state store's event builders make the simulated tasks' streams
import { TaskLog } from '../libs/state-store/src/testing/task-events';
import { asNew } from '../libs/state-store/src/testing/temp-storage';
import { pct } from './api';
import { fmt, median, recordFigure } from './bench-support';
import { benchAuth, startController } from './controller-process';

const TASKS_PER_DAY = Number(process.env.BENCH_RETENTION_TASKS_PER_DAY ?? 2000);
const DAYS = Number(process.env.BENCH_RETENTION_DAYS ?? 30);
const RATE = Number(process.env.BENCH_RETENTION_RATE ?? 100);
const SECONDS = Number(process.env.BENCH_RETENTION_SECONDS ?? 8);
/** tasks a day of the PostgreSQL growth month (0: not run); BENCH_PG_URL names the server */
const PG_TASKS_PER_DAY = Number(
  process.env.BENCH_RETENTION_PG_TASKS_PER_DAY ?? Math.round(TASKS_PER_DAY / 4),
);
const PG_URL =
  process.env.BENCH_PG_URL ??
  process.env.RUNLEDGER_TEST_PG_URL ??
  'postgres://runledger:runledger@localhost:5432/runledger';
const SWEEP_ALONE_SECONDS = Number(process.env.BENCH_RETENTION_SWEEP_SECONDS ?? 8);
const DAY_MS = 86_400_000;
const MONTH_START = Date.parse('2026-01-01T00:00:00Z');

/** One task's events: short (answered in one round) or, one in five, long (ten tool calls with 1 KB outputs). */
function taskEvents(i: number, startMs: number): NewEvent[] {
  const log = new TaskLog(`task_${i}`, `ses_${i}`).received(
    `summarise the report ${i} and list what changed since last week`,
  );
  for (let c = 0; c < (i % 5 === 0 ? 10 : 0); c++) {
    const call = `call_${i}_${c}`;
    log
      .add('TOOL_CALLED', {
        call_id: call,
        tool: 'file_read',
        args: { path: `reports/${c}.md` },
        args_hash: 'h',
        step_id: null,
        idempotent: true,
        attempt: 1,
      })
      .add('TOOL_COMPLETED', {
        call_id: call,
        tool: 'file_read',
        result: {
          tool: 'file_read',
          ok: true,
          output: 'line of the report '.repeat(55),
          error: null,
          metadata: {},
        },
        duration_ms: 3,
      });
  }
  log.completed(`the report ${i} changed in three places`);
  return asNew(log.events).map((e, k) => ({ ...e, created_at: new Date(startMs + k * 200).toISOString() }));
}

const fileBytes = (path: string) => (existsSync(path) ? statSync(path).size : 0);
const folderBytes = (dir: string) =>
  existsSync(dir) ? readdirSync(dir).reduce((n, f) => n + fileBytes(join(dir, f)), 0) : 0;
const mb = (bytes: number) => fmt(bytes / 1e6, 1);

/**
 * Appends one simulated day of `perDay` tasks, each as one append of its whole stream, `writers`
 * of them at a time (a PostgreSQL append is a round trip: several in flight seed faster).
 */
async function appendDay(storage: Storage, day: number, perDay = TASKS_PER_DAY, writers = 1): Promise<void> {
  let next = 0;
  const writer = async () => {
    for (let i = next++; i < perDay; i = next++) {
      const n = day * perDay + i;
      const start = MONTH_START + day * DAY_MS + Math.floor((i / perDay) * (DAY_MS - 60_000));
      await storage.eventStore.append(`task_${n}`, taskEvents(n, start), { expected: 'no_stream' });
    }
  };
  await Promise.all(Array.from({ length: writers }, writer));
}

/** The live database's size: pages in use times page size, after a WAL checkpoint. */
function liveBytes(storage: SqliteStorage): number {
  storage.raw.pragma('wal_checkpoint(TRUNCATE)');
  return fileBytes(storage.raw.name) + fileBytes(`${storage.raw.name}-wal`);
}

/** One database of the growth month: appended to day after day, archived at each day's end when it has a policy. */
interface GrowthSide {
  storage: Storage;
  /** the day's archiving and space reclaiming; absent without a policy */
  archive?: (endOfDay: number) => Promise<number>;
  /**
   * the live database, the archive (SQLite: the segment files; PostgreSQL: archive_segments) and the
   * archive's catalog (SQLite: catalog.db; PostgreSQL: the catalog_* tables)
   */
  size(): Promise<{ live: number; archive: number; catalog: number }>;
  /** bytes per table and index of the live database, largest first */
  parts(): Promise<[string, number][]>;
  close(): Promise<void>;
}

/** the second tier's age in the growth month: short enough that the month shows the plateau */
const CATALOG_AFTER = process.env.BENCH_RETENTION_CATALOG_AFTER ?? '7d';
const policy7d = parseRetention('7d', CATALOG_AFTER)!;

async function sqliteSide(dir: string, name: string, withPolicy: boolean): Promise<GrowthSide> {
  const storage = await createSqliteStorage({ path: join(dir, `${name}.db`), synchronous: 'NORMAL' });
  const access = withPolicy ? openSqliteArchiver(storage.raw.name, { batchTasks: 200 }) : null;
  return {
    storage,
    archive: access
      ? async (endOfDay) => {
          const run = await access.archiver.run(policy7d, endOfDay);
          while ((await access.archiver.reclaim(2000)) > 0);
          return run.tasks.length;
        }
      : undefined,
    size: async () => {
      const file = catalogFile(storage.raw.name);
      if (existsSync(file)) {
        // the catalog's WAL folded into its file, as the live database's is
        const catalogDb = new BetterSqlite3(file);
        catalogDb.pragma('wal_checkpoint(TRUNCATE)');
        catalogDb.close();
      }
      const catalog = fileBytes(file) + fileBytes(`${file}-wal`);
      return {
        live: liveBytes(storage),
        archive: folderBytes(segmentFolder(storage.raw.name)) - catalog,
        catalog,
      };
    },
    parts: async () =>
      storage.raw
        .prepare<[], { name: string; b: number }>(
          'SELECT name, sum(pgsize) AS b FROM dbstat GROUP BY name ORDER BY b DESC',
        )
        .all()
        .map((r) => [r.name, r.b]),
    async close() {
      await access?.close();
      await storage.close();
    },
  };
}

/** A PostgreSQL side: a schema of its own; space comes back by plain VACUUM (reused in place, not returned). */
async function postgresSide(url: string, schema: string, withPolicy: boolean): Promise<GrowthSide> {
  const storage = await createPostgresStorage({ url, schema, maxConnections: 4 });
  const archiver = withPolicy ? postgresArchiver(storage.db, { batchTasks: 200 }) : null;
  const relations = async () =>
    (
      await sql<{ name: string; kind: string; bytes: string; own: string }>`SELECT c.relname AS name,
        c.relkind AS kind, pg_total_relation_size(c.oid) AS bytes,
        CASE WHEN c.relkind = 'r' THEN pg_table_size(c.oid) ELSE pg_relation_size(c.oid) END AS own
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = ${schema} AND c.relkind IN ('r', 'i')`.execute(storage.db)
    ).rows.map((r) => ({ ...r, bytes: Number(r.bytes), own: Number(r.own) }));
  return {
    storage,
    archive: archiver
      ? async (endOfDay) => {
          const run = await archiver.run(policy7d, endOfDay);
          await archiver.vacuum();
          return run.tasks.length;
        }
      : undefined,
    async size() {
      const tables = (await relations()).filter((r) => r.kind === 'r');
      const archive = tables.find((r) => r.name === 'archive_segments')?.bytes ?? 0;
      const catalog = tables.filter((r) => r.name.startsWith('catalog_')).reduce((n, r) => n + r.bytes, 0);
      return { live: tables.reduce((n, r) => n + r.bytes, 0) - archive - catalog, archive, catalog };
    },
    parts: async () =>
      (await relations())
        .filter((r) => r.name !== 'archive_segments' && !r.name.startsWith('catalog_'))
        .sort((a, b) => b.own - a.own)
        .map((r) => [r.name, r.own]),
    close: () => storage.close(),
  };
}

/**
 * A month appended to two databases, one with a 7-day policy (archived at each day's end), one
 * without: the live size per day, the growth per day over the last 20 days, and what an archived
 * task still holds in the live database.
 */
async function growthOf(
  label: string,
  perDay: number,
  open: (withPolicy: boolean) => Promise<GrowthSide>,
): Promise<void> {
  const policy = await open(true);
  const none = await open(false);
  try {
    const curve: {
      day: number;
      policy: number;
      archive: number;
      catalog: number;
      none: number;
      archiveS: number;
    }[] = [];
    let moved = 0;
    for (let day = 0; day < DAYS; day++) {
      await appendDay(policy.storage, day, perDay);
      await appendDay(none.storage, day, perDay);
      const t0 = performance.now();
      moved += await policy.archive!(MONTH_START + (day + 1) * DAY_MS);
      const archiveS = (performance.now() - t0) / 1000;
      const [p, n] = [await policy.size(), await none.size()];
      curve.push({
        day: day + 1,
        policy: p.live,
        archive: p.archive,
        catalog: p.catalog,
        none: n.live,
        archiveS,
      });
    }
    console.log(
      `growth on ${label}: ${DAYS} days x ${perDay} tasks (1 in 5 long: 10 tool calls with 1 KB outputs), policy 7d + catalog after ${CATALOG_AFTER} vs none`,
    );
    console.log(
      '| day | live db, policy (MB) | archive segments (MB) | catalog (MB) | live db, no policy (MB) | archiving that day (s) |',
    );
    console.log('|---|---|---|---|---|---|');
    for (const c of curve)
      console.log(
        `| ${c.day} | ${mb(c.policy)} | ${mb(c.archive)} | ${mb(c.catalog)} | ${mb(c.none)} | ${fmt(c.archiveS, 2)} |`,
      );
    const last = curve[curve.length - 1];
    // the last 10 days: the policy's first archive (day 8) and first catalog move (day 15) are behind
    const from = curve[Math.max(0, curve.length - 11)];
    const days = Math.max(1, last.day - from.day);
    const perDayPolicy = (last.policy - from.policy) / days;
    const perDayNone = (last.none - from.none) / days;
    const perDayArchive = (last.archive + last.catalog - from.archive - from.catalog) / days;
    console.log(
      `archived ${moved} tasks; day ${from.day} to ${last.day}: live db ${perDayPolicy >= 0 ? '+' : ''}${fmt(perDayPolicy / 1e3, 1)} KB/day with the policy, +${fmt(perDayNone / 1e3, 1)} KB/day without (${fmt(perDayPolicy / perDayNone, 3)}x); archive + catalog +${fmt(perDayArchive / 1e3, 1)} KB/day`,
    );
    console.log(
      `live database by table and index at day ${last.day}, policy (${moved} archived, ${perDay * 7} live tasks):`,
    );
    for (const [name, bytes] of (await policy.parts()).slice(0, 12))
      console.log(`  ${name.padEnd(32)} ${mb(bytes).padStart(7)} MB`);
    recordFigure({
      figure: `${label} live size after ${DAYS} days, 7d policy + catalog after ${CATALOG_AFTER} vs none`,
      value: `${mb(last.policy)} MB vs ${mb(last.none)} MB (archive ${mb(last.archive)} MB, catalog ${mb(last.catalog)} MB); ${fmt(perDayPolicy / 1e3, 1)} vs +${fmt(perDayNone / 1e3, 1)} KB/day over the last ${days} days`,
      ratio: last.policy / last.none,
      target: 'plateau: growth per day with the policy under 5% of the growth without',
      met: perDayPolicy <= 0.05 * perDayNone,
    });
  } finally {
    await policy.close();
    await none.close();
  }
}

async function growth(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'rl-bench-growth-'));
  try {
    await growthOf('SQLite', TASKS_PER_DAY, (withPolicy) =>
      sqliteSide(dir, withPolicy ? 'policy' : 'none', withPolicy),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  if (PG_TASKS_PER_DAY <= 0) return;
  const database = `rl_bench_growth_${process.pid}`;
  try {
    await pgAdmin(PG_URL, `CREATE DATABASE ${database}`);
  } catch (err) {
    console.log(
      `growth on PostgreSQL skipped: cannot reach it (${(err as Error).message}); set BENCH_PG_URL`,
    );
    return;
  }
  try {
    const url = new URL(PG_URL);
    url.pathname = `/${database}`;
    await growthOf('PostgreSQL', PG_TASKS_PER_DAY, (withPolicy) =>
      postgresSide(url.toString(), withPolicy ? 'policy' : 'none', withPolicy),
    );
  } finally {
    await pgAdmin(PG_URL, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  }
}

async function pgAdmin(url: string, statement: string): Promise<void> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}

interface LoadResult {
  p50: number;
  p99: number;
  finishedPerSecond: number;
  archived: number;
  /** the server's event-loop delay over the load (prom-client's monitor, 10 ms resolution), ms */
  loopP99: number;
  loopMax: number;
}

/**
 * The server's event-loop delay since the last call, ms (prom-client's monitor, 10 ms resolution,
 * restarted at each read of /metrics).
 */
async function loopDelay(url: string): Promise<{ p99: number; max: number }> {
  const text = await (await fetch(`${url}/metrics`, { headers: benchAuth })).text();
  const gauge = (name: string) => {
    const line = text.split('\n').find((l) => l.startsWith(`${name} `));
    if (!line) throw new Error(`/metrics has no ${name}`);
    return Number(line.split(' ')[1]) * 1000;
  };
  return { p99: gauge('nodejs_eventloop_lag_p99_seconds'), max: gauge('nodejs_eventloop_lag_max_seconds') };
}

async function paced(url: string): Promise<LoadResult> {
  await loopDelay(url);
  const total = RATE * SECONDS;
  const latencies: number[] = [];
  const start = performance.now();
  const sends: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const due = start + (i * 1000) / RATE;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    sends.push(
      fetch(`${url}/tasks`, {
        method: 'POST',
        headers: { ...benchAuth, 'content-type': 'application/json' },
        body: JSON.stringify({ input: `list the files ${i}` }),
      }).then(async (res) => {
        await res.text();
        if (res.status !== 202) throw new Error(`POST /tasks answered ${res.status}`);
        latencies.push(performance.now() - due);
      }),
    );
  }
  await Promise.all(sends);
  let finished = 0;
  for (let after = 0; finished < total;) {
    const res = await fetch(
      `${url}/admin/events?type=TASK_COMPLETED,TASK_FAILED,TASK_CANCELLED&after_position=${after}&limit=1000`,
      { headers: benchAuth },
    );
    const page = (await res.json()) as { events: unknown[]; next_after_position: number };
    finished += page.events.length;
    after = page.next_after_position;
    if (page.events.length < 1000) await new Promise((r) => setTimeout(r, 20));
  }
  const elapsed = (performance.now() - start) / 1000;
  const loop = await loopDelay(url);
  const records = await fetch(`${url}/admin/events?type=TASKS_ARCHIVED&limit=1000`, { headers: benchAuth });
  const archived = (
    (await records.json()) as { events: { payload: { task_ids: string[] } }[] }
  ).events.reduce((n, e) => n + e.payload.task_ids.length, 0);
  latencies.sort((a, b) => a - b);
  return {
    p50: pct(latencies, 50),
    p99: pct(latencies, 99),
    finishedPerSecond: total / elapsed,
    archived,
    loopP99: loop.p99,
    loopMax: loop.max,
  };
}

interface SweepAlone {
  tasksPerSecond: number;
  /** monitorEventLoopDelay's p99: per timer turn, so a long stall counts once, as one turn */
  loopP99: number;
  loopMax: number;
  /** p99 of the wait a request arriving at a random moment would see (stalls weighted by their length) */
  arrivalP99: number;
  /** the share of the time this thread's event loop was busy */
  utilization: number;
}

/** Follows the event loop's stalls with a 1 ms timer chain until stopped. */
function stallProbe(): { stop(): number[] } {
  const gaps: number[] = [];
  let last = performance.now();
  let timer: NodeJS.Timeout;
  const tick = () => {
    const now = performance.now();
    gaps.push(now - last);
    last = now;
    timer = setTimeout(tick, 1);
  };
  timer = setTimeout(tick, 1);
  return {
    stop() {
      clearTimeout(timer);
      return gaps;
    },
  };
}

/**
 * A request arriving during a stall of g ms waits what is left of it: over the window, the share of
 * time a wait over w is met is sum(max(0, g - w)) / total. The w where that share is 1%.
 */
function arrivalWaitP99(gaps: readonly number[]): number {
  const total = gaps.reduce((a, b) => a + b, 0);
  const over = (w: number) => gaps.reduce((n, g) => n + Math.max(0, g - w), 0) / total;
  let [lo, hi] = [0, Math.max(...gaps)];
  for (let i = 0; i < 40; i++) {
    const mid = (lo + hi) / 2;
    if (over(mid) > 0.01) lo = mid;
    else hi = mid;
  }
  return hi;
}

/**
 * The server's sweeper settings (batches of 20, rests of max(100 ms, 4x what a batch held)) on a copy
 * of `seed` for SWEEP_ALONE_SECONDS: the archiver on this thread (the event loop held through each
 * batch) or in its thread; this process's event-loop delay meanwhile (1 ms resolution).
 */
async function sweepAlone(seed: string, dir: string, where: 'here' | 'thread' | 'idle'): Promise<SweepAlone> {
  const path = join(dir, `alone-${where}.db`);
  copyFileSync(seed, path);
  const here = where === 'here' ? openSqliteArchiver(path, { batchTasks: 20 }) : null;
  const thread =
    where === 'thread' ? new ThreadArchiver({ path, batchTasks: 20, companionPrefixes: [] }) : null;
  // the thread compiles its modules first when run from sources: not part of the sweep
  await thread?.reclaim(0);
  const archiver = here?.archiver ?? thread;
  const quiet = { info: () => undefined, error: (f: Record<string, unknown>) => console.error(f) };
  const sweeper = archiver
    ? new RetentionSweeper(archiver, {
        policy: parseRetention('7d')!,
        intervalMs: 60_000,
        restMs: 100,
        log: quiet,
      })
    : null;
  const loop = monitorEventLoopDelay({ resolution: 1 });
  loop.enable();
  const probe = stallProbe();
  const use = performance.eventLoopUtilization();
  const started = performance.now();
  const stop = setTimeout(() => void sweeper?.stop(), SWEEP_ALONE_SECONDS * 1000);
  const run = sweeper ? await sweeper.sweep() : null;
  if (!sweeper) await new Promise((r) => setTimeout(r, SWEEP_ALONE_SECONDS * 1000));
  const seconds = (performance.now() - started) / 1000;
  const utilization = performance.eventLoopUtilization(use).utilization;
  const gaps = probe.stop();
  clearTimeout(stop);
  loop.disable();
  await here?.close();
  await thread?.close();
  return {
    tasksPerSecond: (run?.tasks.length ?? 0) / seconds,
    loopP99: loop.percentile(99) / 1e6,
    loopMax: loop.max / 1e6,
    arrivalP99: arrivalWaitP99(gaps),
    utilization,
  };
}

async function sweeperAlone(seed: string, dir: string): Promise<void> {
  const idle = await sweepAlone(seed, dir, 'idle');
  const here = await sweepAlone(seed, dir, 'here');
  const thread = await sweepAlone(seed, dir, 'thread');
  console.log(
    `the sweeper alone for ${SWEEP_ALONE_SECONDS} s on a month of finished tasks (batches of 20, rests of max(100 ms, 4x what a batch held)); this process's event-loop delay meanwhile`,
  );
  console.log(
    '| sweeper | tasks archived/s | event-loop busy | wait p99 of a random arrival ms | delay p99 per timer turn ms | max stall ms |',
  );
  console.log('|---|---|---|---|---|---|');
  for (const [label, r] of [
    ['none (idle loop)', idle],
    ['archiver on the event loop', here],
    ['archiver in its thread', thread],
  ] as const)
    console.log(
      `| ${label} | ${fmt(r.tasksPerSecond, 1)} | ${fmt(r.utilization * 100, 1)}% | ${fmt(r.arrivalP99, 2)} | ${fmt(r.loopP99, 2)} | ${fmt(r.loopMax, 1)} |`,
    );
  recordFigure({
    figure: 'sweeper tasks archived per second, archiver in its thread vs on the event loop',
    value: `${fmt(thread.tasksPerSecond, 1)}/s vs ${fmt(here.tasksPerSecond, 1)}/s`,
    ratio: thread.tasksPerSecond / here.tasksPerSecond,
    target: 'faster (> 1x)',
    met: thread.tasksPerSecond > here.tasksPerSecond,
  });
  recordFigure({
    figure:
      'event-loop wait p99 of a random arrival while the sweeper runs, archiver in its thread vs on the event loop',
    value: `${fmt(thread.arrivalP99, 2)} ms vs ${fmt(here.arrivalP99, 2)} ms (idle ${fmt(idle.arrivalP99, 2)} ms)`,
    ratio: thread.arrivalP99 / here.arrivalP99,
    target: 'lower (< 1x)',
    met: thread.arrivalP99 < here.arrivalP99,
  });
  recordFigure({
    figure: 'event loop busy while the sweeper runs, archiver in its thread vs on the event loop',
    value: `${fmt(thread.utilization * 100, 1)}% vs ${fmt(here.utilization * 100, 1)}% (idle ${fmt(idle.utilization * 100, 1)}%)`,
    ratio: thread.utilization / here.utilization,
    target: 'lower (< 1x)',
    met: thread.utilization < here.utilization,
  });
}

/** the controller's settings under load, whichever database: memory off, eight tasks at once, no shedding */
const LOAD_ENV = {
  RUNLEDGER_MEMORY: 'off',
  RUNLEDGER_CONCURRENCY: '8',
  RUNLEDGER_OVERLOAD_LOOP_DELAY_MS: '0',
  RUNLEDGER_OVERLOAD_LOOP_UTILIZATION: '1',
  RUNLEDGER_TASK_START_LOOP_UTILIZATION: '1',
  RUNLEDGER_SANDBOX: 'process',
};
const SWEEPING = {
  on: { RUNLEDGER_RETENTION: '7d', RUNLEDGER_RETENTION_SWEEP_MS: '200' },
  off: { RUNLEDGER_RETENTION: 'off' },
};
/** runs of each side, alternated (off, on, off, on...) so a neighbour's load falls on both */
const LOAD_ROUNDS = Number(process.env.BENCH_RETENTION_ROUNDS ?? 2);

/**
 * The same load against a server without a policy and one whose sweeper archives meanwhile,
 * alternated LOAD_ROUNDS times, each run on a fresh copy of the seed (`server(mode, round)`):
 * every run's figures, and the ratios of the medians.
 */
async function compareUnderLoad(
  store: string,
  seedTasks: number,
  server: (mode: 'off' | 'on', round: number) => Promise<{ url: string; stop(): Promise<void> }>,
): Promise<void> {
  const runs: { mode: 'off' | 'on'; round: number; result: LoadResult }[] = [];
  for (let round = 0; round < LOAD_ROUNDS; round++)
    for (const mode of ['off', 'on'] as const) {
      const s = await server(mode, round);
      try {
        await new Promise((r) => setTimeout(r, 1000));
        runs.push({ mode, round, result: await paced(s.url) });
      } finally {
        await s.stop();
      }
    }
  console.log(
    `sweeper under load (${store}): POST /tasks at ${RATE}/s for ${SECONDS} s, a database of ${seedTasks} finished tasks a month old (sys_util tasks), ${LOAD_ROUNDS} alternated runs each`,
  );
  console.log(
    '| run | server | p50 ms | p99 ms | tasks finished/s | event-loop delay p99 ms | max ms | tasks archived meanwhile |',
  );
  console.log('|---|---|---|---|---|---|---|---|');
  for (const { mode, round, result: r } of runs)
    console.log(
      `| ${round + 1} | ${mode === 'on' ? 'sweeper on (7d)' : 'no policy'} | ${fmt(r.p50, 1)} | ${fmt(r.p99, 1)} | ${fmt(r.finishedPerSecond, 1)} | ${fmt(r.loopP99, 1)} | ${fmt(r.loopMax, 1)} | ${r.archived} |`,
    );
  const med = (mode: 'off' | 'on', pick: (r: LoadResult) => number) =>
    median(runs.filter((r) => r.mode === mode).map((r) => pick(r.result)));
  const off = {
    p99: med('off', (r) => r.p99),
    tps: med('off', (r) => r.finishedPerSecond),
    loop: med('off', (r) => r.loopP99),
  };
  const on = {
    p99: med('on', (r) => r.p99),
    tps: med('on', (r) => r.finishedPerSecond),
    loop: med('on', (r) => r.loopP99),
  };
  const archived = Math.min(...runs.filter((r) => r.mode === 'on').map((r) => r.result.archived));
  console.log(
    `medians, sweeper on vs off: POST p99 ${fmt(on.p99, 1)} vs ${fmt(off.p99, 1)} ms (${fmt(on.p99 / off.p99, 2)}x), tasks/s ${fmt(on.tps, 1)} vs ${fmt(off.tps, 1)} (${fmt(on.tps / off.tps, 2)}x), event-loop p99 ${fmt(on.loop, 1)} vs ${fmt(off.loop, 1)} ms (${fmt(on.loop / off.loop, 2)}x)`,
  );
  recordFigure({
    figure: `${store}: the server's event-loop delay p99 while the sweeper archives, vs no policy (${RATE}/s, median of ${LOAD_ROUNDS})`,
    value: `${fmt(on.loop, 1)} ms vs ${fmt(off.loop, 1)} ms`,
    ratio: on.loop / off.loop,
    target: 'within 1.5x',
    met: on.loop <= off.loop * 1.5,
  });
  recordFigure({
    figure: `${store}: POST /tasks p99 while the sweeper archives, vs no policy (${RATE}/s, median of ${LOAD_ROUNDS})`,
    value: `${fmt(on.p99, 1)} ms vs ${fmt(off.p99, 1)} ms (at least ${archived} tasks archived meanwhile)`,
    ratio: on.p99 / off.p99,
    target: 'p99 within 1.5x, the sweeper moving tasks',
    met: on.p99 <= off.p99 * 1.5 && archived > 0,
  });
  recordFigure({
    figure: `${store}: tasks finished per second while the sweeper archives, vs no policy (median of ${LOAD_ROUNDS})`,
    value: `${fmt(on.tps, 1)}/s vs ${fmt(off.tps, 1)}/s`,
    ratio: on.tps / off.tps,
    target: 'at least 0.9x',
    met: on.tps >= off.tps * 0.9,
  });
}

/** finished tasks a month old in the database the load runs against */
const LOAD_SEED_TASKS = Number(process.env.BENCH_RETENTION_SEED_TASKS ?? 20_000);
/** the same on PostgreSQL, where seeding is slower: more than its sweeper moves in a run */
const PG_LOAD_SEED_TASKS = Number(process.env.BENCH_RETENTION_PG_SEED_TASKS ?? 6_000);

async function sweeperUnderLoad(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'rl-bench-sweep-'));
  try {
    const seed = join(dir, 'seed.db');
    const storage = await createSqliteStorage({ path: seed, synchronous: 'NORMAL' });
    const seedDays = Math.max(1, Math.round(LOAD_SEED_TASKS / TASKS_PER_DAY));
    for (let day = 0; day < seedDays; day++) await appendDay(storage, day);
    storage.raw.pragma('wal_checkpoint(TRUNCATE)');
    await storage.close();
    if (PARTS.has('alone')) await sweeperAlone(seed, dir);
    if (!PARTS.has('sweeper')) return;
    await compareUnderLoad('SQLite', seedDays * TASKS_PER_DAY, async (mode, round) => {
      const run = join(dir, `${mode}-${round}`);
      mkdirSync(join(run, 'workspace'), { recursive: true });
      copyFileSync(seed, join(run, 'bench.db'));
      return startController(join(run, 'bench.db'), join(run, 'workspace'), {
        ...LOAD_ENV,
        RUNLEDGER_SQLITE_SYNCHRONOUS: 'NORMAL',
        // from sources the server appends on its event loop unless told otherwise; the build uses the
        // writer thread under concurrency (BENCH_RETENTION_WRITER_THREAD=on measures that)
        RUNLEDGER_SQLITE_WRITER_THREAD: process.env.BENCH_RETENTION_WRITER_THREAD ?? 'auto',
        ...SWEEPING[mode],
      });
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The same on PostgreSQL (BENCH_PG_URL): one seeded database, and a copy of it per run (CREATE
 * DATABASE ... TEMPLATE), so every run starts from the same month; the sweeper runs on the
 * server's pool, under the archive lease.
 */
async function sweeperUnderLoadPg(): Promise<void> {
  const prefix = `rl_bench_sweep_${process.pid}`;
  const seedDb = `${prefix}_seed`;
  const urlOf = (database: string) => {
    const url = new URL(PG_URL);
    url.pathname = `/${database}`;
    return url.toString();
  };
  try {
    await pgAdmin(PG_URL, `CREATE DATABASE ${seedDb}`);
  } catch (err) {
    console.log(
      `sweeper under load on PostgreSQL skipped: cannot reach it (${(err as Error).message}); set BENCH_PG_URL`,
    );
    return;
  }
  const copies: string[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'rl-bench-sweep-pg-'));
  try {
    const storage = await createPostgresStorage({ url: urlOf(seedDb), schema: 'bench', maxConnections: 8 });
    const seedDays = Math.max(1, Math.round(PG_LOAD_SEED_TASKS / TASKS_PER_DAY));
    const seeding = performance.now();
    for (let day = 0; day < seedDays; day++) await appendDay(storage, day, TASKS_PER_DAY, 8);
    await storage.close();
    console.log(
      `PostgreSQL seed: ${seedDays * TASKS_PER_DAY} tasks in ${fmt((performance.now() - seeding) / 1000, 1)} s`,
    );
    mkdirSync(join(dir, 'workspace'), { recursive: true });
    await compareUnderLoad('PostgreSQL', seedDays * TASKS_PER_DAY, async (mode, round) => {
      const copy = `${prefix}_${mode}_${round}`;
      await pgAdmin(PG_URL, `CREATE DATABASE ${copy} TEMPLATE ${seedDb}`);
      copies.push(copy);
      return startController(urlOf(copy), join(dir, 'workspace'), {
        ...LOAD_ENV,
        RUNLEDGER_PG_SCHEMA: 'bench',
        ...SWEEPING[mode],
      });
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
    for (const database of [...copies, seedDb])
      await pgAdmin(PG_URL, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  }
}

async function archivedReads(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'rl-bench-read-'));
  try {
    const storage = await createSqliteStorage({ path: join(dir, 'read.db'), synchronous: 'NORMAL' });
    const perDay = Math.min(TASKS_PER_DAY, 2000);
    for (let day = 0; day < 2; day++) await appendDay(storage, day);
    // day 0's tasks move (eight segments or more); day 1's stay live
    const batch = Math.max(5, Math.min(200, Math.floor(perDay / 8)));
    const access = openSqliteArchiver(storage.raw.name, { batchTasks: batch });
    await access.archiver.run(parseRetention('1d')!, MONTH_START + 2 * DAY_MS - 60_000);
    await access.close();
    const time = async (ids: string[]) => {
      const each: number[] = [];
      for (const id of ids) {
        const t0 = performance.now();
        const events = await storage.eventStore.readWholeStream(id);
        each.push(performance.now() - t0);
        if (events.length !== 22) throw new Error(`${id}: ${events.length} events read, 22 written`);
      }
      return median(each) * 1000;
    };
    // long tasks (22 events) of as many segments, so every read of the cold set opens a segment not read before
    const archived = Array.from({ length: 8 }, (_, s) => `task_${Math.floor((s * batch) / 5) * 5 + 5}`);
    const live = archived.map((id) => `task_${Number(id.slice(5)) + perDay}`);
    const cold = await time(archived);
    const warm = await time(archived.slice(-4));
    const liveUs = await time(live);
    console.log('archived vs live read (readWholeStream of a long task, 22 events; median of 8 / 4)');
    console.log(`| read | median us | ratio to live |`);
    console.log('|---|---|---|');
    console.log(`| live | ${fmt(liveUs)} | 1.00x |`);
    console.log(`| archived, segment not read before | ${fmt(cold)} | ${fmt(cold / liveUs, 2)}x |`);
    console.log(`| archived, segment cached | ${fmt(warm)} | ${fmt(warm / liveUs, 2)}x |`);
    recordFigure({
      figure: 'read an archived task (cold segment) vs a live one',
      value: `${fmt(cold)} us vs ${fmt(liveUs)} us`,
      ratio: cold / liveUs,
      target: 'correct; slower is fine (< 100 ms)',
      met: cold < 100_000,
    });
    await storage.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** BENCH_RETENTION_PARTS: which parts run, comma-separated (reads, growth, alone, sweeper, sweeper-pg); all by default */
const PARTS = new Set(
  (process.env.BENCH_RETENTION_PARTS ?? 'reads,growth,alone,sweeper,sweeper-pg').split(','),
);

export async function main(): Promise<void> {
  if (PARTS.has('reads')) await archivedReads();
  if (PARTS.has('growth')) await growth();
  if (PARTS.has('alone') || PARTS.has('sweeper')) await sweeperUnderLoad();
  if (PARTS.has('sweeper-pg')) await sweeperUnderLoadPg();
}
