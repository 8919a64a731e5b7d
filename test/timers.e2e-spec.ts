import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isTerminalStatus } from '@runledger/contracts';
import { describePostgres, useTestPostgres } from '@runledger/testing';
import { ServerProcess, pgServerPair } from './permissions-server';

/**
 * Durable timers through real server processes: a task that waits holds nothing, survives a SIGKILL
 * while it waits, and is fired exactly once; on PostgreSQL two instances share the timers and one
 * is SIGKILLed at the moment they come due.
 */
jest.setTimeout(120_000);

const WAIT_MS = 400;

interface Ev {
  task_id: string;
  sequence: number;
  type: string;
  created_at: string;
  payload: Record<string, unknown>;
}

/** an orchestrator that waits, then answers */
function scriptIn(server: ServerProcess, waitMs: number): void {
  const path = join(server.dir, 'script.json');
  writeFileSync(
    path,
    JSON.stringify({
      orchestrator: [
        JSON.stringify({ type: 'wait', duration_ms: waitMs }),
        JSON.stringify({ type: 'respond', content: 'woke up' }),
      ],
    }),
  );
  server.env.RUNLEDGER_MODEL = `scripted:${path}`;
}

const eventsOf = async (server: ServerProcess, taskId: string): Promise<Ev[]> =>
  (await server.request('GET', `/tasks/${taskId}/events?limit=1000`)).body.events as Ev[];

/** one TIMER_SET and one TIMER_FIRED, fired no earlier than due, then the answer; sequences gap-free */
function expectFiredOnce(events: Ev[]): void {
  const set = events.filter((e) => e.type === 'TIMER_SET');
  const fired = events.filter((e) => e.type === 'TIMER_FIRED');
  expect(set).toHaveLength(1);
  expect(fired).toHaveLength(1);
  expect(fired[0].payload.timer_id).toBe(set[0].payload.timer_id);
  expect(Date.parse(fired[0].created_at)).toBeGreaterThanOrEqual(Date.parse(set[0].payload.due_at as string));
  expect(events.map((e) => e.sequence)).toEqual(events.map((_, k) => k + 1));
  expect(events[events.length - 1].type).toBe('TASK_COMPLETED');
  expect(events[events.length - 1].payload.result).toBe('woke up');
}

describe('durable timers on SQLite', () => {
  let server: ServerProcess;
  beforeEach(() => {
    server = ServerProcess.create({ LOG_LEVEL: 'warn', RUNLEDGER_MEMORY: 'off' });
    scriptIn(server, WAIT_MS);
  });
  afterEach(() => server.dispose());

  it('a wait directive records TIMER_SET with its due time, waits as `waiting`, and fires once when due', async () => {
    await server.start();
    const res = await server.request('POST', '/tasks', { input: 'check again shortly' });
    expect(res.status).toBe(202);
    const id = res.body.task_id as string;
    const waiting = await server.waitFor(id, (s) => s === 'waiting');
    expect(waiting.status).toBe('waiting');
    const set = (await eventsOf(server, id)).find((e) => e.type === 'TIMER_SET')!;
    expect(set.payload).toMatchObject({ step_id: 'wait', duration_ms: WAIT_MS, until: null });
    // due from when it was set, computed once
    const due = Date.parse(set.payload.due_at as string);
    expect(due - Date.parse(set.created_at)).toBeGreaterThanOrEqual(WAIT_MS - 50);
    expect(due - Date.parse(set.created_at)).toBeLessThanOrEqual(WAIT_MS + 50);
    await server.waitFor(id, isTerminalStatus, 10_000);
    expectFiredOnce(await eventsOf(server, id));
  });

  it('a task killed while it waits is fired after the restart, once, by the new process', async () => {
    await server.start();
    const id = (await server.request('POST', '/tasks', { input: 'wait across a crash' })).body
      .task_id as string;
    await server.waitFor(id, (s) => s === 'waiting');
    await server.kill();
    // down past the due time: the new process finds the timer in the log and fires it at once
    await new Promise((r) => setTimeout(r, WAIT_MS + 200));
    // under load the new process can take seconds to boot and take the task over; the wait below is a poll
    await server.start();
    await server.waitFor(id, isTerminalStatus, 30_000);
    const events = await eventsOf(server, id);
    expectFiredOnce(events);
    // a waiting task is not resumed as if it had been running
    expect(events.filter((e) => e.type === 'GUARD_TRIGGERED' && e.payload.guard === 'resumed')).toEqual([]);
  });

  it('a wait in a plan step, and a bad wait refused as the plan is parsed', async () => {
    const path = join(server.dir, 'plan-script.json');
    writeFileSync(
      path,
      JSON.stringify({
        orchestrator: [
          JSON.stringify({ type: 'wait', duration_ms: 5, until: '2030-01-01T00:00:00Z' }),
          JSON.stringify({
            type: 'plan',
            steps: [
              { id: 'nap', kind: 'wait', args: { duration_ms: 200 } },
              { id: 'say', kind: 'respond', args: { content: 'after the nap' }, depends_on: ['nap'] },
            ],
          }),
        ],
      }),
    );
    server.env.RUNLEDGER_MODEL = `scripted:${path}`;
    await server.start();
    const id = (await server.request('POST', '/tasks', { input: 'plan with a nap' })).body.task_id as string;
    const done = await server.waitFor(id, isTerminalStatus, 10_000);
    expect(done.status).toBe('completed');
    expect(done.result).toBe('after the nap');
    const events = await eventsOf(server, id);
    // the first reply asked for both a duration and a time: corrected, never waited on
    expect(events.filter((e) => e.type === 'TIMER_SET').map((e) => e.payload.step_id)).toEqual(['nap']);
    expect(events.filter((e) => e.type === 'TIMER_FIRED')).toHaveLength(1);
  });
});

describePostgres('durable timers on PostgreSQL: two instances, one killed as the timers come due', () => {
  const pg = useTestPostgres('rl_timers');
  let a: ServerProcess;
  let b: ServerProcess;
  const TASKS = 12;
  const PG_WAIT_MS = 1_500;

  beforeEach(async () => {
    [a, b] = await pgServerPair(pg, (first) => scriptIn(first, PG_WAIT_MS));
  });
  afterEach(async () => {
    await b.dispose();
    await a.dispose();
  });

  it('every timer fires exactly once, the survivor firing what the dead instance did not', async () => {
    await Promise.all([a.start(), b.start()]);
    const servers = [a, b];
    const ids: string[] = [];
    for (let i = 0; i < TASKS; i++) {
      const res = await servers[i % 2].request('POST', '/tasks', { input: `timer ${i}` });
      expect(res.status).toBe(202);
      ids.push(res.body.task_id as string);
    }
    for (const id of ids) await b.waitFor(id, (s) => s === 'waiting' || isTerminalStatus(s), 20_000);
    // the earliest due time: A dies as the firings begin
    const dues = await Promise.all(
      ids.map(async (id) => {
        const set = (await eventsOf(b, id)).find((e) => e.type === 'TIMER_SET')!;
        return Date.parse(set.payload.due_at as string);
      }),
    );
    await new Promise((r) => setTimeout(r, Math.max(0, Math.min(...dues) - Date.now())));
    await a.kill();
    for (const id of ids) {
      const done = await b.waitFor(id, isTerminalStatus, 30_000);
      expect(done.status).toBe('completed');
    }
    for (const id of ids) expectFiredOnce(await eventsOf(b, id));
  });
});
