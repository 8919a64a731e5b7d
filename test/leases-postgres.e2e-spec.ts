import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isTerminalStatus } from '@runledger/contracts';
import { describePostgres, useTestPostgres } from '@runledger/testing';
import { ADMIN, ServerProcess } from './permissions-server';

/**
 * Two server processes on one PostgreSQL database, as behind a load balancer: 100 tasks submitted
 * alternately to both, a quarter waiting for a permission answered through the other instance,
 * a quarter running a slow command; one instance is SIGKILLed midway, and the other finishes
 * every task once the dead one's leases expired.
 */
const RENEW_MS = 250;
const TTL_MS = 2_000;
const TASKS = 100;

jest.setTimeout(300_000);

interface Ev {
  event_id: string;
  task_id: string;
  sequence: number;
  position: number;
  type: string;
  payload: Record<string, unknown>;
}

const kindOf = (i: number) => (['permission', 'slow', 'quick', 'quick'] as const)[i % 4];
const inputOf = (i: number) =>
  kindOf(i) === 'permission'
    ? `run echo effect-${i} >> effects.txt`
    : kindOf(i) === 'slow'
      ? 'run sleep 8'
      : `run echo quick-${i}`;

describePostgres('leases: two servers on one PostgreSQL database', () => {
  const pg = useTestPostgres('rl_e2e');
  let a: ServerProcess;
  let b: ServerProcess;

  beforeEach(async () => {
    const schema = await pg.freshSchema({ migrate: false });
    await schema.handle.close();
    a = ServerProcess.create({
      RUNLEDGER_DB: schema.url,
      RUNLEDGER_PG_SCHEMA: schema.schema,
      RUNLEDGER_PG_POOL_SIZE: '8',
      RUNLEDGER_LEASE_RENEW_MS: String(RENEW_MS),
      RUNLEDGER_LEASE_TTL_MS: String(TTL_MS),
      RUNLEDGER_CONCURRENCY: '64',
      RUNLEDGER_MEMORY: 'off',
      LOG_LEVEL: 'warn',
    });
    a.env.RUNLEDGER_DATA_DIR = join(a.dir, 'data');
    b = ServerProcess.beside(a);
  });
  afterEach(async () => {
    await b.dispose();
    await a.dispose();
  });

  /** the whole global log through one instance, page by page */
  const globalLog = async (server: ServerProcess): Promise<Ev[]> => {
    const out: Ev[] = [];
    for (let after = 0; ;) {
      const res = await server.request('GET', `/admin/events?after_position=${after}&limit=1000`);
      expect(res.status).toBe(200);
      out.push(...(res.body.events as Ev[]));
      if (res.body.events.length < 1000) return out;
      after = res.body.next_after_position as number;
    }
  };
  const until = async (what: string, holds: () => Promise<boolean>, timeoutMs = 60_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!(await holds())) {
      if (Date.now() > deadline) throw new Error(`never happened: ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };

  it('the survivor finishes every task: no acknowledged event lost, no gap, no side effect twice, one global log', async () => {
    await Promise.all([a.start(), b.start()]);
    const servers = [a, b];
    const tasks: { id: string; kind: ReturnType<typeof kindOf>; via: number }[] = [];
    for (let i = 0; i < TASKS; i++) {
      const res = await servers[i % 2].request('POST', '/tasks', { input: inputOf(i) });
      expect(res.status).toBe(202);
      tasks.push({ id: res.body.task_id, kind: kindOf(i), via: i % 2 });
    }

    // every permission is answered through the instance the task was not submitted to
    for (const t of tasks.filter((x) => x.kind === 'permission')) {
      const waiting = await servers[t.via].waitFor(t.id, (s) => s === 'awaiting_permission', 60_000);
      const other = servers[1 - t.via];
      const answered = await other.request(
        'POST',
        `/tasks/${t.id}/permissions/${waiting.pending[0].request_id}`,
        { decision: 'allow_once' },
      );
      expect(answered.status).toBe(202);
    }

    // midway: the slow commands are running (some on each instance) when the first instance dies
    const slow = tasks.filter((t) => t.kind === 'slow');
    await until('every slow command started', async () => {
      const log = await globalLog(b);
      return slow.every((t) => log.some((e) => e.task_id === t.id && e.type === 'TOOL_CALLED'));
    });
    const acknowledged = await globalLog(a);
    await a.kill();

    // waitFor throws for a task that does not end
    for (const t of tasks) await b.waitFor(t.id, isTerminalStatus, TTL_MS + 90_000);
    const finalLog = await globalLog(b);

    // the kill was midway: the slow commands A ran were taken over by B once A's leases expired
    const resumed = new Set(
      finalLog
        .filter((e) => e.type === 'GUARD_TRIGGERED' && e.payload.guard === 'resumed')
        .map((e) => e.task_id),
    );
    const slowOnA = slow.filter((t) => t.via === 0).map((t) => t.id);
    expect(slowOnA.filter((id) => !resumed.has(id))).toEqual([]);

    // no acknowledged event lost: what A served before it died is still there, at the same positions
    const byId = new Map(finalLog.map((e) => [e.event_id, e]));
    for (const e of acknowledged) expect(byId.get(e.event_id)).toEqual(e);

    // no sequence gap in any task, positions strictly increasing
    for (let i = 1; i < finalLog.length; i++)
      expect(finalLog[i].position).toBeGreaterThan(finalLog[i - 1].position);
    for (const t of tasks) {
      const seqs = finalLog.filter((e) => e.task_id === t.id).map((e) => e.sequence);
      expect(seqs).toEqual(seqs.map((_, k) => k + 1));
      // no call recorded twice; a call the kill cut off is not run again (outcome unknown)
      const calls = finalLog.filter((e) => e.task_id === t.id && e.type === 'TOOL_CALLED');
      expect(new Set(calls.map((e) => e.payload.call_id)).size).toBe(calls.length);
    }

    // every approved side effect ran at most once, and those not cut off by the kill ran
    const effects = existsSync(join(a.workspace, 'effects.txt'))
      ? readFileSync(join(a.workspace, 'effects.txt'), 'utf8').trim().split('\n').filter(Boolean)
      : [];
    expect(new Set(effects).size).toBe(effects.length);
    const permissionTasks = tasks.filter((t) => t.kind === 'permission');
    const completedWrites = permissionTasks.filter((t) =>
      finalLog.some((e) => e.task_id === t.id && e.type === 'TOOL_COMPLETED'),
    );
    expect(completedWrites.length).toBeGreaterThan(0);
    expect(effects.length).toBeGreaterThanOrEqual(completedWrites.length);
    expect(effects.length).toBeLessThanOrEqual(permissionTasks.length);

    // the global log is one log: a fresh instance reads the same as the survivor
    const again = ServerProcess.beside(a);
    await again.start();
    try {
      expect(await globalLog(again)).toEqual(await globalLog(b));
    } finally {
      await again.kill();
    }
  });

  it('an SSE stream opened on B follows live, to its final event, a task that A runs', async () => {
    await Promise.all([a.start(), b.start()]);
    const { body } = await a.request('POST', '/tasks', { input: 'run sleep 2' });
    const opened = Date.now();
    const res = await fetch(`${b.url}/tasks/${body.task_id}/stream`, {
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    expect(res.status).toBe(200);
    const streamed = (await res.text())
      .split('\n')
      .filter((line) => line.startsWith('data:'))
      .map((line) => JSON.parse(line.slice(5)) as Ev);
    // the command takes two seconds: the stream was open while A wrote, not a replay of a finished task
    expect(Date.now() - opened).toBeGreaterThan(1_500);
    expect(streamed.at(-1)?.type).toBe('TASK_COMPLETED');
    expect(streamed.map((e) => e.event_id)).toEqual(
      ((await a.events(body.task_id)) as unknown as Ev[]).map((e) => e.event_id),
    );
  });
});
