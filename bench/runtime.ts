/**
 * npm run bench -- runtime
 * The runtime loop's cost per task against the log it writes: tasks with a
 * 3-step plan of in-memory `echo` tools (scripted orchestrator, no model, no
 * process spawned) run through RuntimeController on createSqliteStorage, and
 * the baseline appends the very same events (copied from the runs) straight
 * to a second store of the same kind, one append per event as the loop does.
 * The ratio is what folding, routing, scheduling and the queue add on top of
 * durable appends. Also: throughput at queue concurrency 1 and 4.
 * Env: BENCH_TASKS (200), BENCH_SYNCHRONOUS (FULL).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NewEvent } from '@runledger/contracts';
import { SqliteSynchronous } from '@runledger/event-store';
import { ScriptedBackend } from '@runledger/runtime';
import { SqliteStorage, createSqliteStorage } from '@runledger/state-store';
import { AllowAllPolicy, startTestRuntime, testToolRegistry } from '../libs/runtime/src/testing';

const TASKS = Number(process.env.BENCH_TASKS ?? 200);
const SYNCHRONOUS = (process.env.BENCH_SYNCHRONOUS ?? 'FULL') as SqliteSynchronous;

const plan = JSON.stringify({
  type: 'plan',
  steps: [
    { id: 'a', kind: 'tool', tool: 'echo', args: { text: 'one' } },
    { id: 'b', kind: 'tool', tool: 'echo', args: { text: 'two' } },
    {
      id: 'c',
      kind: 'tool',
      tool: 'echo',
      args: { text: '${steps.a.output} ${steps.b.output}' },
      depends_on: ['a', 'b'],
    },
  ],
});

async function withStorage<T>(work: (s: SqliteStorage, dir: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'rl-bench-runtime-'));
  const storage = await createSqliteStorage({ path: join(dir, 'bench.db'), synchronous: SYNCHRONOUS });
  try {
    return await work(storage, dir);
  } finally {
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function runTasks(concurrency: number): Promise<{ ms: number; events: NewEvent[][] }> {
  return withStorage(async (storage, dir) => {
    const rt = await startTestRuntime({
      store: storage.eventStore,
      tools: testToolRegistry(dir),
      permissions: new AllowAllPolicy(),
      model: new ScriptedBackend({ orchestrator: [plan, '{"type":"respond","content":"done"}'] }),
      concurrency,
    });
    const started = performance.now();
    const ids = await Promise.all(
      Array.from({ length: TASKS }, (_, i) =>
        rt.runtime.submit({ input: `bench ${i}` }, { source: 'api' }).then((r) => r.task_id),
      ),
    );
    const finals = await Promise.all(ids.map((id) => rt.runtime.settled(id)));
    const ms = performance.now() - started;
    if (finals.some((p) => p.final?.stop_reason !== 'completed'))
      throw new Error('a bench task did not complete');
    const events = await Promise.all(
      ids.map(async (id) =>
        (await storage.eventStore.readWholeStream(id)).map(
          (e) => ({ type: e.type, payload: e.payload, session_id: e.session_id }) as NewEvent,
        ),
      ),
    );
    await rt.close();
    return { ms, events };
  });
}

async function appendOnly(recorded: NewEvent[][]): Promise<number> {
  return withStorage(async (storage) => {
    const started = performance.now();
    await Promise.all(
      recorded.map(async (events, t) => {
        for (let i = 0; i < events.length; i++)
          await storage.eventStore.append(`task_base_${t}`, [events[i]], {
            expected: i === 0 ? 'no_stream' : i,
          });
      }),
    );
    return performance.now() - started;
  });
}

export async function main(): Promise<void> {
  const one = await runTasks(1);
  const four = await runTasks(4);
  const perTask = one.events[0].length;
  const base = await appendOnly(one.events);
  const fmt = (ms: number) =>
    `${ms.toFixed(0)} ms total, ${(ms / TASKS).toFixed(2)} ms/task, ${((TASKS * 1000) / ms).toFixed(0)} tasks/s`;
  console.log(
    `${TASKS} tasks, ${perTask} events each (3-step plan + respond), SQLite synchronous=${SYNCHRONOUS}`,
  );
  console.log(`baseline: the same events appended one by one: ${fmt(base)}`);
  console.log(
    `runtime, queue concurrency 1: ${fmt(one.ms)}  ratio to baseline ${(one.ms / base).toFixed(2)}x`,
  );
  console.log(
    `runtime, queue concurrency 4: ${fmt(four.ms)}  ratio to baseline ${(four.ms / base).toFixed(2)}x`,
  );
}
