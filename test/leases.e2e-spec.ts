import { mkdirSync, readFileSync, existsSync, writeFileSync } from 'node:fs';
import { createServer, Server } from 'node:net';
import { join } from 'node:path';
import { openSqlite } from '@runledger/event-store';
import { readTaskLog } from '@runledger/testing';
import { ServerProcess } from './permissions-server';

/**
 * Two server processes on one SQLite file (real child processes): a task belongs to the process
 * that runs it through its lease. The other never writes to it while that lease is live, and takes
 * it over once the owner is gone (SIGKILL: nothing released) and the lease expired, without running
 * a tool's side effect a second time.
 */
const RENEW_MS = 200;
const TTL_MS = 1_500;
/** the slow call outlasts the second server's boot and several recovery sweeps */
const SLOW_MS = 60_000;

jest.setTimeout(120_000);

type Ev = { type: string; payload: Record<string, unknown>; created_at: string };

describe('leases: two servers on one SQLite file', () => {
  let a: ServerProcess;
  let b: ServerProcess | null = null;
  let countFile: string;

  beforeEach(() => {
    a = ServerProcess.create({
      RUNLEDGER_LEASE_RENEW_MS: String(RENEW_MS),
      RUNLEDGER_LEASE_TTL_MS: String(TTL_MS),
      RUNLEDGER_MEMORY: 'off',
      // as `npm start` runs: appends, leases and every other write on each server's writer thread
      RUNLEDGER_SQLITE_WRITER_THREAD: 'on',
    });
    countFile = join(a.dir, 'side-effects.txt');
    // a tool whose side effect can be counted: one line per run, naming its task and call
    const plugin = join(a.dir, 'plugins', 'count_line');
    mkdirSync(plugin, { recursive: true });
    writeFileSync(
      join(plugin, 'manifest.json'),
      JSON.stringify({
        name: 'count_line',
        description: 'waits delay_ms, then appends a line naming its task and call',
        args_schema: {
          type: 'object',
          properties: { delay_ms: { type: 'integer' } },
          required: ['delay_ms'],
          additionalProperties: false,
        },
        timeout_ms: SLOW_MS * 2,
      }),
    );
    writeFileSync(
      join(plugin, 'index.js'),
      `const { appendFileSync } = require('node:fs');
      exports.createTool = () => ({ run: async (args, ctx) => {
        await new Promise((resolve, reject) => {
          const t = setTimeout(resolve, args.delay_ms);
          ctx.signal.addEventListener('abort', () => { clearTimeout(t); reject(new Error('aborted')); });
        });
        appendFileSync(${JSON.stringify(countFile)}, ctx.task_id + ' ' + ctx.call_id + '\\n');
        return { ok: true, output: 'counted' };
      } });`,
    );
    const step = (id: string, delay_ms: number, depends_on: string[] = []) => ({
      id,
      kind: 'tool',
      tool: 'count_line',
      args: { delay_ms },
      description: id,
      depends_on,
    });
    writeFileSync(
      join(a.dir, 'script.json'),
      JSON.stringify({
        orchestrator: [
          JSON.stringify({ type: 'plan', steps: [step('fast', 0), step('slow', SLOW_MS, ['fast'])] }),
          JSON.stringify({ type: 'respond', content: 'done' }),
        ],
      }),
    );
    a.env.RUNLEDGER_PLUGINS = join(a.dir, 'plugins');
    a.env.RUNLEDGER_MODEL = `scripted:${join(a.dir, 'script.json')}`;
  });
  afterEach(async () => {
    await b?.kill();
    b = null;
    await a.dispose();
  });

  const events = async (server: ServerProcess, taskId: string): Promise<Ev[]> =>
    (await server.events(taskId)) as Ev[];
  const until = async (what: string, holds: () => Promise<boolean>, timeoutMs = 30_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!(await holds())) {
      if (Date.now() > deadline) throw new Error(`never happened: ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const runningSlowCall = (server: ServerProcess, taskId: string) => async () =>
    (await events(server, taskId)).some((e) => e.type === 'TOOL_CALLED' && e.payload.step_id === 'slow');
  const sideEffects = () =>
    existsSync(countFile) ? readFileSync(countFile, 'utf8').trim().split('\n').filter(Boolean) : [];

  it('the second never appends to tasks the first runs; it takes them over only after the first is killed, running no side effect twice', async () => {
    await a.start();
    const tasks: string[] = [];
    for (const input of ['first task', 'second task']) {
      const res = await a.request('POST', '/tasks', { input });
      expect(res.status).toBe(202);
      tasks.push(res.body.task_id);
    }
    for (const taskId of tasks) await until(`${taskId} runs its slow call`, runningSlowCall(a, taskId));
    const before = await Promise.all(tasks.map((t) => events(a, t)));

    b = ServerProcess.beside(a);
    await b.start();
    // several recovery sweeps and lease lifetimes go by while the first server's calls still run
    await new Promise((r) => setTimeout(r, TTL_MS * 3));
    for (const [i, taskId] of tasks.entries()) {
      const now = await events(b, taskId);
      expect(now).toEqual(before[i]);
      expect(now.some((e) => e.type === 'GUARD_TRIGGERED' || e.type === 'TOOL_FAILED')).toBe(false);
    }

    await a.kill();
    const killedAt = Date.now();
    for (const taskId of tasks) {
      expect(await b.waitFor(taskId, undefined, TTL_MS + 20_000)).toMatchObject({ status: 'completed' });
      const log = await events(b, taskId);
      const resumed = log.filter((e) => e.type === 'GUARD_TRIGGERED' && e.payload.guard === 'resumed');
      expect(resumed).toHaveLength(1);
      // not before the dead server's lease ran out
      expect(Date.parse(resumed[0].created_at)).toBeGreaterThanOrEqual(killedAt + TTL_MS - 1_000);
      // the call cut off by the kill is not run again: its outcome is unknown, the orchestrator decides
      const calls = log.filter((e) => e.type === 'TOOL_CALLED').map((e) => e.payload.call_id);
      expect(new Set(calls).size).toBe(calls.length);
      expect(log.filter((e) => e.type === 'TOOL_FAILED').map((e) => e.payload.error_kind)).toEqual([
        'outcome_unknown',
      ]);
      expect(log.map((e, i) => (e as unknown as { sequence: number }).sequence - i)).toEqual(
        log.map(() => 1),
      );
    }
    // each task's fast call ran once, its slow call never (killed mid-wait), and nothing twice
    const lines = sideEffects();
    expect(new Set(lines).size).toBe(lines.length);
    expect(lines.map((l) => l.split(' ')[0]).sort()).toEqual([...tasks].sort());
  });

  it('a permission approved through the other server: it takes the waiting task (which holds no lease) and runs it', async () => {
    a.env.RUNLEDGER_MODEL = 'sys_util';
    await a.start();
    b = ServerProcess.beside(a);
    await b.start();
    const { body } = await a.request('POST', '/tasks', { input: 'run echo approved >> approved.txt' });
    const waiting = await a.waitFor(body.task_id, (s) => s === 'awaiting_permission');
    const requestId = waiting.pending[0].request_id;
    const answered = await b.request('POST', `/tasks/${body.task_id}/permissions/${requestId}`, {
      decision: 'allow_once',
    });
    expect(answered.status).toBe(202);
    expect(await b.waitFor(body.task_id)).toMatchObject({ status: 'completed' });
    expect(await a.waitFor(body.task_id)).toMatchObject({ status: 'completed' });
    expect(readFileSync(join(a.workspace, 'approved.txt'), 'utf8')).toBe('approved\n');
    const { log, leases } = await readTask(a.env.RUNLEDGER_DB, body.task_id);
    expect(log.filter((e) => e.type === 'TOOL_CALLED')).toHaveLength(1);
    // the task's last lease was the second server's, released at the end
    expect(leases).toEqual([
      expect.objectContaining({
        task_id: body.task_id,
        owner: expect.stringContaining(`:${b.pid}:`),
        expires_at: 0,
      }),
    ]);
  });

  /** the task's log and every lease row, read from the file */
  const readTask = async (db: string, taskId: string) => {
    const handle = openSqlite({ path: db });
    try {
      const leases = handle.raw.prepare('SELECT * FROM task_leases ORDER BY task_id').all();
      return { log: await readTaskLog(db, taskId), leases };
    } finally {
      await handle.close();
    }
  };

  it('a server whose port is taken exits before it claims or writes any task', async () => {
    await a.start();
    const { body } = await a.request('POST', '/tasks', { input: 'left behind' });
    await until('the slow call runs', runningSlowCall(a, body.task_id));
    await a.kill();
    // the dead server's lease ran out: a server that booted would take this task over
    await new Promise((r) => setTimeout(r, TTL_MS + 500));
    const before = await readTask(a.env.RUNLEDGER_DB, body.task_id);

    const blocker: Server = createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
    const port = (blocker.address() as { port: number }).port;
    try {
      const c = ServerProcess.beside(a, { PORT: String(port) });
      await expect(c.start()).rejects.toThrow(/server exited: [\s\S]*EADDRINUSE/);
      expect(await readTask(a.env.RUNLEDGER_DB, body.task_id)).toEqual(before);
    } finally {
      blocker.close();
    }
  });
});
