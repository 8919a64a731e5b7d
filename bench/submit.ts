/**
 * npm run bench -- submit
 * POST /tasks latency at fixed paced rates, open loop: request i is due at start + i/rate and is
 * sent then whether or not earlier ones were answered; its latency runs from its due time to the
 * end of its response, so time spent queued anywhere (client, kernel, server) counts. Against:
 *   - the controller in a child process (sys_util, durable SQLite, tasks running in the background)
 *   - baseline: a bare express handler doing one SQLite insert (same pragmas), same run
 * Each rate runs on both after a 1 s warm-up, BENCH_SUBMIT_ROUNDS times (5) alternating; the
 * controller's tasks are drained between rounds; the target is judged on the median round's p99.
 * Env: BENCH_SUBMIT_RATES (100,250,500 req/s), BENCH_SUBMIT_SECONDS (5), BENCH_SUBMIT_ROUNDS (5),
 *      RUNLEDGER_SQLITE_SYNCHRONOUS (FULL), RUNLEDGER_CONCURRENCY (8),
 *      BENCH_SUBMIT_CPU_PROF=<dir>: the controller writes a --cpu-prof profile there on exit,
 *      BENCH_SUBMIT_CONTROLLER (sources; build in `npm run bench` without names): `sources` runs the TypeScript sources through swc-node;
 *      `build` runs `npm run build` (not with BENCH_BUILD=off), then the build, as `npm start` does (measured alike: the
 *      sources are compiled at boot, before the warm-up).
 */
import { execFileSync } from 'node:child_process';
import http from 'node:http';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { json, pct, startServer, waitAllFinal } from './api';
import { fmt, median, recordFigure } from './bench-support';
import { CONTROLLER_BUILD, CONTROLLER_SOURCES, benchAuth as auth, spawnServer } from './controller-process';

const RATES = (process.env.BENCH_SUBMIT_RATES ?? '100,250,500').split(',').map(Number);
const SECONDS = Number(process.env.BENCH_SUBMIT_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_SUBMIT_ROUNDS ?? 5);
if (!Number.isInteger(ROUNDS) || ROUNDS < 1)
  throw new Error(`BENCH_SUBMIT_ROUNDS must be a positive integer, not ${process.env.BENCH_SUBMIT_ROUNDS}`);
const TARGET = { rate: 500, p99Ms: 20 };
const CONTROLLER = process.env.BENCH_SUBMIT_CONTROLLER ?? 'sources';
if (CONTROLLER !== 'build' && CONTROLLER !== 'sources')
  throw new Error(`BENCH_SUBMIT_CONTROLLER must be build or sources, not ${CONTROLLER}`);

/** The controller's entry: the build is made fresh first, so it runs what the sources say now. */
function controllerEntry(): string {
  if (CONTROLLER === 'sources') return CONTROLLER_SOURCES;
  if (process.env.BENCH_BUILD !== 'off')
    execFileSync('npm', ['run', '-s', 'build'], {
      cwd: join(__dirname, '..'),
      stdio: ['ignore', 'ignore', 'inherit'],
    });
  return CONTROLLER_BUILD;
}

/** CPU time (user + system) a process has used, ms; null where /proc is not there. */
function cpuMsOf(pid: number | undefined): number | null {
  const stat = `/proc/${pid}/stat`;
  if (pid === undefined || !existsSync(stat)) return null;
  // fields after the command name (which may hold spaces): utime and stime are the 12th and 13th
  const fields = readFileSync(stat, 'utf8').split(') ')[1].split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
}

interface PacedResult {
  rate: number;
  /** wall clock (ms since the epoch) when the first request was due and when the last was answered */
  window: { from: number; to: number };
  offered: number;
  ok: number;
  /** non-2xx answers by status and, for a backpressure refusal, the limit it names (its details' first key) */
  refused: Map<string, number>;
  errors: number;
  /** ms from each answered request's due time to the end of its response, sorted */
  latencies: number[];
  /** server CPU ms per request while this rate ran (its background tasks included), when known */
  cpuMsPerRequest: number | null;
}

/** Which limit a refusal's error body names (e.g. loop_utilization), '' when it names none. */
function refusalLimit(body: string): string {
  try {
    const details = (JSON.parse(body) as { details?: unknown }).details;
    return details && typeof details === 'object' ? (Object.keys(details)[0] ?? '') : '';
  } catch {
    return '';
  }
}

/** Sends `rate` POST /tasks a second for `seconds`, each at its due time. */
async function paced(url: string, rate: number, seconds: number, serverPid?: number): Promise<PacedResult> {
  const cpuBefore = cpuMsOf(serverPid);
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  const { hostname, port } = new URL(url);
  const body = JSON.stringify({ input: 'hello from the paced submit bench' });
  const headers = { ...auth, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) };
  const total = Math.round(rate * seconds);
  const result: PacedResult = {
    rate,
    offered: total,
    ok: 0,
    refused: new Map(),
    errors: 0,
    latencies: [],
    cpuMsPerRequest: null,
    window: { from: Date.now() + 20, to: 0 },
  };
  const start = performance.now() + 20;
  const dueAt = (i: number) => start + (i * 1000) / rate;
  await new Promise<void>((allAnswered) => {
    let answered = 0;
    const settle = () => {
      if (++answered === total) allAnswered();
    };
    const send = (due: number) => {
      const req = http.request({ agent, hostname, port, path: '/tasks', method: 'POST', headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const status = res.statusCode ?? 0;
          if (status >= 200 && status < 300) {
            result.ok++;
            result.latencies.push(performance.now() - due);
          } else {
            const why = `${status} ${refusalLimit(Buffer.concat(chunks).toString())}`.trim();
            result.refused.set(why, (result.refused.get(why) ?? 0) + 1);
          }
          settle();
        });
      });
      req.on('error', () => {
        result.errors++;
        settle();
      });
      req.end(body);
    };
    let next = 0;
    const sendDue = () => {
      const now = performance.now();
      for (; next < total && dueAt(next) <= now; next++) send(dueAt(next));
      if (next < total) setTimeout(sendDue, Math.max(0, dueAt(next) - performance.now()));
    };
    setTimeout(sendDue, Math.max(0, start - performance.now()));
  });
  result.window.to = Date.now();
  agent.destroy();
  result.latencies.sort((a, b) => a - b);
  const cpuAfter = cpuMsOf(serverPid);
  if (cpuBefore !== null && cpuAfter !== null) result.cpuMsPerRequest = (cpuAfter - cpuBefore) / total;
  return result;
}

/**
 * The task work the controller committed while submissions came in: events after `afterPosition`
 * other than TASK_RECEIVED created within `window` (the submissions get the loop first, so this stays
 * low while they arrive). Also where the log ends now.
 */
async function taskEventsWithin(
  url: string,
  afterPosition: number,
  window: PacedResult['window'],
): Promise<{ events: number; head: number }> {
  let head = afterPosition;
  let events = 0;
  for (;;) {
    const page = (await json(`${url}/admin/events?after_position=${head}&limit=1000`)) as {
      events: { type: string; created_at: string }[];
      next_after_position: number;
    };
    for (const e of page.events) {
      const at = Date.parse(e.created_at);
      if (e.type !== 'TASK_RECEIVED' && at >= window.from && at <= window.to) events++;
    }
    head = page.next_after_position;
    if (page.events.length < 1000) return { events, head };
  }
}

/** p99 of a round; Infinity when nothing was answered 2xx */
const p99Of = (r: PacedResult): number => (r.latencies.length ? pct(r.latencies, 99) : Infinity);

const describeResult = (name: string, r: PacedResult, baseline: PacedResult | null): string => {
  const p = (q: number) => (r.latencies.length ? pct(r.latencies, q) : NaN);
  const refused = [...r.refused].map(([why, n]) => `${n}x${why}`).join(', ');
  const vsBaseline = baseline?.latencies.length
    ? `   p99 = ${fmt(p(99) / pct(baseline.latencies, 99), 1)}x baseline`
    : '';
  return (
    `${String(r.rate).padStart(4)} req/s  ${name.padEnd(22)} p50 ${fmt(p(50), 2).padStart(7)} ms  p95 ${fmt(p(95), 2).padStart(7)} ms  p99 ${fmt(p(99), 2).padStart(8)} ms` +
    `   2xx ${r.ok}/${r.offered} = ${fmt(r.ok / r.offered, 3)} of offered` +
    (refused ? `   refused ${refused}` : '') +
    (r.errors ? `   ${r.errors} connection errors` : '') +
    (r.cpuMsPerRequest !== null ? `   server cpu ${fmt(r.cpuMsPerRequest, 2)} ms/request` : '') +
    vsBaseline
  );
};

export async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'rl-bench-submit-'));
  const profileDir = process.env.BENCH_SUBMIT_CPU_PROF;
  if (profileDir) mkdirSync(profileDir, { recursive: true });
  const runledger = await startServer(
    dir,
    {},
    {
      controllerEntry: controllerEntry(),
      nodeArgs: profileDir ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : [],
    },
  );
  const baseline = await spawnServer(
    'bench/express-insert-server.ts',
    { BENCH_BASELINE_DB: join(dir, 'baseline.db') },
    { echoStderr: true },
  );
  try {
    const synchronous = process.env.RUNLEDGER_SQLITE_SYNCHRONOUS ?? 'FULL';
    console.log(
      `submit bench: open-loop paced POST /tasks, ${SECONDS} s per rate, latency from each request's due time; SQLite synchronous=${synchronous}; controller (${CONTROLLER}) RUNLEDGER_CONCURRENCY=${process.env.RUNLEDGER_CONCURRENCY ?? 8}`,
    );
    let accepted = 0;
    for (const server of [baseline, runledger]) {
      const warm = await paced(server.url, 100, 1, server.child.pid);
      if (server === runledger) accepted += warm.ok;
    }
    await waitAllFinal(runledger.url, accepted);
    let head = (await taskEventsWithin(runledger.url, 0, { from: 0, to: 0 })).head;
    let atTarget: PacedResult[] = [];
    let baseAtTarget: number[] = [];
    for (const rate of RATES) {
      const rounds: Array<{ base: PacedResult; ours: PacedResult }> = [];
      for (let round = 1; round <= ROUNDS; round++) {
        const base = await paced(baseline.url, rate, SECONDS, baseline.child.pid);
        const ours = await paced(runledger.url, rate, SECONDS, runledger.child.pid);
        if (ROUNDS > 1) console.log(`round ${round} of ${ROUNDS}`);
        console.log(describeResult('express + 1 insert', base, null));
        console.log(describeResult('runledger', ours, base));
        accepted += ours.ok;
        const drainStart = Date.now();
        await waitAllFinal(runledger.url, accepted);
        const drainSeconds = (Date.now() - drainStart) / 1000;
        const during = await taskEventsWithin(runledger.url, head, ours.window);
        head = during.head;
        console.log(
          `           (the controller committed ${during.events} task events while the submissions came in, and finished the ${ours.ok} accepted tasks ${fmt(drainSeconds, 1)} s after the last answer)`,
        );
        rounds.push({ base, ours });
      }
      if (ROUNDS > 1) {
        const ours = rounds.map((r) => p99Of(r.ours));
        const base = rounds.map((r) => p99Of(r.base));
        console.log(
          `${String(rate).padStart(4)} req/s  median of ${ROUNDS} rounds: runledger p99 ${fmt(median(ours), 2)} ms (${ours.map((v) => fmt(v, 1)).join(' / ')}), express + 1 insert p99 ${fmt(median(base), 2)} ms (${base.map((v) => fmt(v, 1)).join(' / ')})`,
        );
      }
      if (rate === TARGET.rate) {
        atTarget = rounds.map((r) => r.ours);
        baseAtTarget = rounds.map((r) => p99Of(r.base));
      }
    }
    if (atTarget.length > 0) {
      const p99 = median(atTarget.map(p99Of));
      const offered = atTarget.reduce((n, r) => n + r.offered, 0);
      const ok = atTarget.reduce((n, r) => n + r.ok, 0);
      const met = p99 < TARGET.p99Ms && ok === offered;
      console.log(
        `target ${TARGET.rate} req/s paced: p99 < ${TARGET.p99Ms} ms (median of ${atTarget.length} rounds) and 2xx == offered: ${met ? 'met' : 'NOT met'} (p99 ${fmt(p99, 2)} ms, 2xx ${ok}/${offered})`,
      );
      recordFigure({
        figure: `POST /tasks at ${TARGET.rate} req/s paced, controller ${CONTROLLER}, p99 (median of ${atTarget.length} rounds)`,
        value: `${fmt(p99, 2)} ms, 2xx ${ok}/${offered} (express + 1 insert: ${fmt(median(baseAtTarget), 2)} ms)`,
        ratio: null,
        target: `< ${TARGET.p99Ms} ms, every one accepted`,
        met,
      });
    }
  } finally {
    await baseline.stop();
    await runledger.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  main().catch((e: unknown) => {
    console.error(e);
    process.exit(1);
  });
}
