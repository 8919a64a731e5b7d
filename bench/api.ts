/**
 * npm run bench -- api
 * The controller runs in its own child process (as `npm start` would, sys_util
 * model, durable SQLite); load comes from this process over loopback.
 *   1. GET /health with autocannon: the HTTP floor of the stack (baseline)
 *   2. POST /tasks with autocannon: accepted submissions/s, p50/p99, then
 *      end-to-end tasks/s until every submitted task is final
 *   3. WS replay: subscribe_all from 0 over the whole log, events/s, next to
 *      paging the same log through GET /admin/events (baseline)
 *   4. per-task WS replay latency (subscribe -> final event), p50/p99
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { fmt } from './bench-support';
import { SpawnOptions, benchAuth as auth, startController } from './controller-process';

// autocannon ships no types; this is the part of its result used here
interface CannonResult {
  requests: { average: number; total: number };
  latency: { p50: number; p99: number; average: number };
  non2xx: number;
  errors: number;
  duration: number;
  statusCodeStats: Record<string, { count: number }>;
}

/**
 * POST /tasks answers a closed-loop flood as designed: 202, or 429 / 503 with Retry-After once the queue or
 * the event loop is full. Anything else, or a connection error, fails the bench.
 */
function submissionsOf(result: CannonResult): { accepted: number; refused: Record<string, number> } {
  const refused: Record<string, number> = {};
  let accepted = 0;
  for (const [status, { count }] of Object.entries(result.statusCodeStats)) {
    if (status === '202') accepted += count;
    else if (status === '429' || status === '503') refused[status] = count;
    else throw new Error(`POST /tasks answered ${count} requests with ${status}`);
  }
  if (result.errors) throw new Error(`POST /tasks: ${result.errors} connection errors`);
  return { accepted, refused };
}
// eslint-disable-next-line @typescript-eslint/no-require-imports
const autocannon = require('autocannon') as (opts: Record<string, unknown>) => Promise<CannonResult>;

const SUBMISSIONS = Number(process.env.BENCH_API_TASKS ?? 2000);
const CONNECTIONS = Number(process.env.BENCH_API_CONNECTIONS ?? 16);

export const pct = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

/** The controller in a child process: sys_util model, durable SQLite in `dir`, no rate limit, its stderr echoed. */
export function startServer(
  dir: string,
  env: Record<string, string> = {},
  options: Omit<SpawnOptions, 'echoStderr'> = {},
) {
  return startController(
    join(dir, 'bench.db'),
    join(dir, 'workspace'),
    { RUNLEDGER_CONCURRENCY: process.env.RUNLEDGER_CONCURRENCY ?? '8', ...env },
    { ...options, echoStderr: true },
  );
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function json(url: string, init: RequestInit = {}): Promise<any> {
  const res = await fetch(url, {
    ...init,
    headers: { ...auth, 'content-type': 'application/json', ...(init.headers as Record<string, string>) },
  });
  if (!res.ok) throw new Error(`${init.method ?? 'GET'} ${url}: ${res.status} ${await res.text()}`);
  return res.json();
}

/** Counts final events through the admin log (cheap, incremental) until every submitted task has ended. */
export async function waitAllFinal(url: string, expected: number): Promise<void> {
  let after = 0;
  let done = 0;
  while (done < expected) {
    const page = await json(
      `${url}/admin/events?type=TASK_COMPLETED,TASK_FAILED,TASK_CANCELLED&after_position=${after}&limit=1000`,
    );
    done += page.events.length;
    after = page.next_after_position;
    if (page.events.length < 1000) await new Promise((r) => setTimeout(r, 50));
  }
}

function wsConnect(url: string): Promise<WebSocket> {
  return new Promise((resolveWs, reject) => {
    const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/ws`, { headers: auth });
    ws.once('open', () => resolveWs(ws));
    ws.once('error', reject);
  });
}

async function wsReplayAll(url: string, head: number): Promise<number> {
  const ws = await wsConnect(url);
  const started = process.hrtime.bigint();
  await new Promise<void>((done) => {
    ws.on('message', (data) => {
      const m = JSON.parse(data.toString());
      if (m.type === 'event' && m.event.position >= head) done();
    });
    ws.send(JSON.stringify({ type: 'subscribe_all', after_position: 0 }));
  });
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  ws.close();
  return seconds;
}

async function restReplayAll(url: string): Promise<{ seconds: number; events: number }> {
  const started = process.hrtime.bigint();
  let after = 0;
  let events = 0;
  for (;;) {
    const page = await json(`${url}/admin/events?after_position=${after}&limit=1000`);
    events += page.events.length;
    if (page.events.length < 1000) break;
    after = page.next_after_position;
  }
  return { seconds: Number(process.hrtime.bigint() - started) / 1e9, events };
}

async function perTaskReplay(url: string, taskIds: string[]): Promise<number[]> {
  const ws = await wsConnect(url);
  const latencies: number[] = [];
  for (const [i, taskId] of taskIds.entries()) {
    const started = process.hrtime.bigint();
    await new Promise<void>((done) => {
      const onMessage = (data: WebSocket.RawData) => {
        const m = JSON.parse(data.toString());
        if (
          m.type === 'event' &&
          m.subscription_id === `t${i}` &&
          ['TASK_COMPLETED', 'TASK_FAILED', 'TASK_CANCELLED'].includes(m.event.type)
        ) {
          ws.off('message', onMessage);
          done();
        }
      };
      ws.on('message', onMessage);
      ws.send(JSON.stringify({ type: 'subscribe', task_id: taskId, after_seq: 0, subscription_id: `t${i}` }));
    });
    latencies.push(Number(process.hrtime.bigint() - started) / 1e6);
    ws.send(JSON.stringify({ type: 'unsubscribe', subscription_id: `t${i}` }));
  }
  ws.close();
  return latencies.sort((a, b) => a - b);
}

export async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'rl-bench-api-'));
  const { url, stop } = await startServer(dir);
  try {
    console.log(
      `api bench: controller child process at ${url} (sys_util, SQLite synchronous=${process.env.RUNLEDGER_SQLITE_SYNCHRONOUS ?? 'FULL'}), ${CONNECTIONS} connections`,
    );
    const health = await autocannon({
      url: `${url}/health`,
      connections: CONNECTIONS,
      amount: SUBMISSIONS * 2,
    });
    const submit = await autocannon({
      url: `${url}/tasks`,
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ input: 'hello from the api bench' }),
      connections: CONNECTIONS,
      amount: SUBMISSIONS,
    });
    const { accepted, refused } = submissionsOf(submit);
    const e2eStart = Date.now() - submit.duration * 1000;
    await waitAllFinal(url, accepted);
    const e2eSeconds = (Date.now() - e2eStart) / 1000;

    const head = (await json(`${url}/admin/events?limit=1`)).head_position as number;
    const rest = await restReplayAll(url);
    const wsSeconds = await wsReplayAll(url, head);
    const tasks = (await json(`${url}/tasks?limit=200`)).tasks.map((t: { task_id: string }) => t.task_id);
    const perTask = await perTaskReplay(url, tasks);

    console.log(
      `GET /health (baseline)     ${fmt(health.requests.average)} req/s   p50 ${health.latency.p50} ms   p99 ${health.latency.p99} ms`,
    );
    const refusals = Object.entries(refused).map(([status, count]) => `${count} answered ${status}`);
    console.log(
      `POST /tasks                ${fmt(submit.requests.average)} req/s   p50 ${submit.latency.p50} ms   p99 ${submit.latency.p99} ms   = ${fmt(submit.requests.average / health.requests.average, 2)}x GET /health; ` +
        `${accepted} of ${SUBMISSIONS} accepted (202)${refusals.length ? `, ${refusals.join(', ')} (backpressure, with Retry-After)` : ''}`,
    );
    console.log(
      `tasks end to end           ${fmt(accepted / e2eSeconds)} tasks/s (${accepted} accepted, all final after ${fmt(e2eSeconds, 1)} s)`,
    );
    console.log(
      `REST page replay (baseline) ${fmt(rest.events / rest.seconds)} events/s (${rest.events} events, pages of 1000)`,
    );
    console.log(
      `WS subscribe_all replay    ${fmt(head / wsSeconds)} events/s (${head} events in ${fmt(wsSeconds, 2)} s) = ${fmt(head / wsSeconds / (rest.events / rest.seconds), 2)}x REST paging`,
    );
    console.log(
      `WS per-task replay         p50 ${fmt(pct(perTask, 50), 2)} ms   p99 ${fmt(pct(perTask, 99), 2)} ms (${perTask.length} tasks, subscribe -> final event)`,
    );
  } finally {
    await stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  main().catch((e: unknown) => {
    console.error(e);
    process.exit(1);
  });
}
