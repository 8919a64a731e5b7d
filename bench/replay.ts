/**
 * npm run bench -- replay
 * Replay of one long task to a client, against reading the same rows raw.
 * A task of BENCH_REPLAY_EVENTS events (TASK_RECEIVED, output chunks of
 * ~200 characters, TASK_COMPLETED) is written to a SQLite file; the
 * controller runs on it in a child process (as `npm start` would), and this
 * process replays the task from its first event:
 *   - WebSocket: subscribe from after_seq 0, until the last event's frame;
 *   - SSE: GET /tasks/:id/stream, until the response ends after the final event;
 *   - baseline: a better-sqlite3 SELECT of the same rows with JSON.parse of
 *     each payload, in this process.
 * Each is run BENCH_RUNS (5) times, alternating; printed: the median events/s
 * of each and the ratio of the replays to the baseline. The client counts
 * frames and bytes and parses nothing, so the figures are the server's.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import WebSocket from 'ws';
import { NewEvent, emptyUsage } from '@runledger/contracts';
import { createSqliteStorage } from '@runledger/state-store';
import { fmt, median, recordFigure } from './bench-support';
import { benchAuth, startController } from './controller-process';

const EVENTS = Number(process.env.BENCH_REPLAY_EVENTS ?? 10_000);
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const TASK_ID = 'task_bench_replay';
const BATCH = 1000;

/** The task's events: received, EVENTS - 2 output chunks, completed. */
function taskEvents(): NewEvent[] {
  const text = 'replayed output line with some words in it; '.repeat(5);
  return [
    { type: 'TASK_RECEIVED', payload: { input: 'a long task to replay', session_id: 'ses_bench' } },
    ...Array.from({ length: EVENTS - 2 }, (_, i): NewEvent => ({
      type: 'OUTPUT_CHUNK',
      payload: { call_id: 'call_1', index: i, delta: text },
    })),
    {
      type: 'TASK_COMPLETED',
      payload: { stop_reason: 'completed', detail: 'done', usage: emptyUsage(), result: 'done' },
    },
  ] as NewEvent[];
}

async function writeTask(db: string): Promise<void> {
  const storage = await createSqliteStorage({ path: db, synchronous: 'NORMAL' });
  try {
    const events = taskEvents();
    for (let at = 0; at < events.length; at += BATCH)
      await storage.eventStore.append(TASK_ID, events.slice(at, at + BATCH), {
        expected: at === 0 ? 'no_stream' : at,
      });
  } finally {
    await storage.close();
  }
}

/** Seconds to SELECT the task's rows and JSON.parse each payload, as a replay reads them. */
function rawRead(db: Database.Database): number {
  const select = db.prepare('SELECT * FROM events WHERE task_id = ? ORDER BY sequence');
  const started = performance.now();
  const rows = select.all(TASK_ID) as Array<{ payload: string }>;
  let parsed = 0;
  for (const row of rows) if (JSON.parse(row.payload) !== null) parsed++;
  const seconds = (performance.now() - started) / 1000;
  if (parsed !== EVENTS) throw new Error(`raw read: ${parsed} rows, expected ${EVENTS}`);
  return seconds;
}

/** Seconds from subscribe to the frame of the task's last event. */
async function wsReplay(url: string): Promise<number> {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/ws`, { headers: benchAuth });
  await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
  const started = performance.now();
  await new Promise<void>((done, fail) => {
    let frames = 0;
    ws.on('message', (data) => {
      // the first frame is `subscribed`; every one after it is an event
      if (++frames === 1) {
        const text = data.toString();
        if (!text.startsWith('{"type":"subscribed"')) fail(new Error(`subscribe refused: ${text}`));
        return;
      }
      if (frames === EVENTS + 1) done();
    });
    ws.send(JSON.stringify({ type: 'subscribe', task_id: TASK_ID, after_seq: 0 }));
  });
  const seconds = (performance.now() - started) / 1000;
  ws.close();
  return seconds;
}

/** Seconds from the request to the end of the stream (it ends after the final event). */
async function sseReplay(url: string): Promise<number> {
  const started = performance.now();
  const res = await fetch(`${url}/tasks/${TASK_ID}/stream`, { headers: benchAuth });
  if (res.status !== 200 || !res.body) throw new Error(`SSE: ${res.status} ${await res.text()}`);
  // messages end with a blank line; counted in the bytes, nothing decoded
  let messages = 0;
  let lastByte = 0;
  const reader = res.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    const bytes = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
    if (lastByte === 10 && bytes[0] === 10) messages++;
    for (let at = bytes.indexOf('\n\n'); at !== -1; at = bytes.indexOf('\n\n', at + 2)) messages++;
    lastByte = bytes[bytes.length - 1];
  }
  const seconds = (performance.now() - started) / 1000;
  if (messages !== EVENTS) throw new Error(`SSE: ${messages} messages, expected ${EVENTS}`);
  return seconds;
}

/** the least share of raw reads' rate a replay keeps */
const REPLAY_TARGET = 0.5;

export async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'rl-bench-replay-'));
  const db = join(dir, 'bench.db');
  mkdirSync(join(dir, 'workspace'));
  await writeTask(db);
  const server = await startController(db, join(dir, 'workspace'));
  const reader = new Database(db, { readonly: true });
  try {
    console.log(
      `replay of one ${fmt(EVENTS)}-event task (~${JSON.stringify(taskEvents()[1].payload).length}-byte payloads) ` +
        `from a controller child process, median of ${RUNS} alternating runs`,
    );
    // warm-up, not reported: the server's first replay compiles its paths
    await wsReplay(server.url);
    await sseReplay(server.url);
    rawRead(reader);
    const raw: number[] = [];
    const ws: number[] = [];
    const sse: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      raw.push(EVENTS / rawRead(reader));
      ws.push(EVENTS / (await wsReplay(server.url)));
      sse.push(EVENTS / (await sseReplay(server.url)));
    }
    const base = median(raw);
    console.log(`raw SELECT + JSON.parse (baseline) ${fmt(base).padStart(10)} events/s`);
    console.log(
      `WebSocket replay                   ${fmt(median(ws)).padStart(10)} events/s   ratio ${fmt(median(ws) / base, 2)}x`,
    );
    console.log(
      `SSE replay                         ${fmt(median(sse)).padStart(10)} events/s   ratio ${fmt(median(sse) / base, 2)}x`,
    );
    for (const [how, rates] of [
      ['WebSocket', ws],
      ['SSE', sse],
    ] as const)
      recordFigure({
        figure: `replay over ${how}, against raw reads`,
        value: `${fmt(median(rates))} vs ${fmt(base)} events/s`,
        ratio: median(rates) / base,
        target: `>= ${REPLAY_TARGET}x`,
        met: median(rates) / base >= REPLAY_TARGET,
      });
  } finally {
    reader.close();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
