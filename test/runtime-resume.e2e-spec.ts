import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RuntimeEvent } from '@runledger/contracts';
import { SqliteEventStore, SqliteHandle, openSqlite } from '@runledger/event-store';
import { runCli, spawnCli } from '@runledger/testing';

const sh = (id: string, command: string, depends_on: string[] = []) => ({
  id,
  kind: 'tool',
  tool: 'shell_exec',
  args: { command },
  depends_on,
});
const json = (v: unknown) => JSON.stringify(v);

const LEASE_TTL_MS = 800;

describe('a task killed mid-run (SIGKILL) resumes from its log', () => {
  let dir: string;
  let env: Record<string, string>;
  let handle: SqliteHandle;
  let store: SqliteEventStore;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'rl-resume-'));
    env = {
      RUNLEDGER_DB: join(dir, 'runledger.db'),
      RUNLEDGER_MODEL: `scripted:${join(dir, 'script.json')}`,
      // a killed process's leases run out soon, so resume may take its tasks
      RUNLEDGER_LEASE_RENEW_MS: '100',
      RUNLEDGER_LEASE_TTL_MS: String(LEASE_TTL_MS),
    };
  });
  afterEach(async () => {
    await handle?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** the task's log as another process sees it; empty until the CLI has created and migrated the database */
  const events = async (): Promise<RuntimeEvent[]> => {
    if (!existsSync(env.RUNLEDGER_DB)) return [];
    try {
      if (!handle) {
        handle = openSqlite({ path: env.RUNLEDGER_DB });
        store = new SqliteEventStore(handle);
      }
      const [received] = await store.readAll({ types: ['TASK_RECEIVED'] });
      return received ? await store.readWholeStream(received.task_id) : [];
    } catch {
      await handle?.close();
      handle = undefined as unknown as SqliteHandle;
      return [];
    }
  };

  /** start `run`, SIGKILL it as soon as `when` holds for the log */
  async function killWhen(input: string, when: (log: RuntimeEvent[]) => boolean): Promise<RuntimeEvent[]> {
    const { child, done } = spawnCli(['run', input, '--yes'], { cwd: dir, env });
    const deadline = Date.now() + 20_000;
    for (;;) {
      const log = await events();
      if (when(log)) break;
      if (Date.now() > deadline)
        throw new Error(`condition never held; log: ${log.map((e) => e.type).join(',')}`);
      await new Promise((r) => setTimeout(r, 25));
    }
    child.kill('SIGKILL');
    const res = await done;
    expect(res.signal).toBe('SIGKILL');
    // nothing released the dead process's lease: resume may take the task once it expired
    await new Promise((r) => setTimeout(r, LEASE_TTL_MS + 100));
    return events();
  }

  const lines = () => readFileSync(join(dir, 'out.txt'), 'utf8').trim().split('\n');

  it('killed while the orchestrator thinks about round 2: completed steps are not run again', async () => {
    writeFileSync(
      join(dir, 'script.json'),
      json({
        orchestrator: [
          json({
            type: 'plan',
            steps: [sh('s1', 'echo one >> out.txt'), sh('s2', 'echo two >> out.txt', ['s1'])],
          }),
          { content: json({ type: 'plan', steps: [sh('s3', 'echo three >> out.txt')] }), delay_ms: 3000 },
          json({ type: 'respond', content: 'all three written' }),
        ],
      }),
    );
    const atKill = await killWhen('write three lines', (log) =>
      log.some((e) => e.type === 'MODEL_CALLED' && e.payload.round === 2),
    );
    expect(atKill.some((e) => e.type === 'TASK_COMPLETED')).toBe(false);
    expect(lines()).toEqual(['one', 'two']);

    const res = await runCli(['resume', atKill[0].task_id, '--yes'], { cwd: dir, env });
    expect(res.stderr).toContain('stop reason: completed');
    expect(res.code).toBe(0);
    expect(lines()).toEqual(['one', 'two', 'three']);
    const log = await events();
    expect(log.map((e) => e.sequence)).toEqual(log.map((_, i) => i + 1));
    expect(log.filter((e) => e.type === 'GUARD_TRIGGERED' && e.payload.guard === 'resumed')).toHaveLength(1);
    const stepsCompleted = log
      .filter((e) => e.type === 'STEP_COMPLETED')
      .map((e) => (e.type === 'STEP_COMPLETED' ? e.payload.step_id : ''));
    expect(stepsCompleted).toEqual(['s1', 's2', 's3']);
    expect(log[log.length - 1]).toMatchObject({
      type: 'TASK_COMPLETED',
      payload: { result: 'all three written' },
    });
  });

  it('killed while a non-idempotent tool runs: the call is marked outcome_unknown, not re-run, and the orchestrator decides', async () => {
    writeFileSync(
      join(dir, 'script.json'),
      json({
        orchestrator: [
          json({
            type: 'plan',
            steps: [
              sh('s1', 'echo one >> out.txt'),
              sh('s2', 'sleep 3; echo two >> out.txt', ['s1']),
              sh('s3', 'echo three >> out.txt', ['s2']),
            ],
          }),
          json({ type: 'respond', content: 'step two may or may not have run' }),
        ],
      }),
    );
    const atKill = await killWhen('slow middle step', (log) =>
      log.some((e) => e.type === 'TOOL_CALLED' && e.payload.step_id === 's2'),
    );
    const res = await runCli(['resume', atKill[0].task_id, '--yes'], { cwd: dir, env });
    expect(res.code).toBe(0);
    // the person is told, after the answer, which side effect may or may not have happened
    expect(res.stderr).toContain(
      '! check by hand: shell_exec {"command":"sleep 3; echo two >> out.txt"} (call_1_s2) was cut off by a restart',
    );
    const log = await events();
    const failed = log.find((e) => e.type === 'TOOL_FAILED');
    expect(failed?.payload).toMatchObject({ call_id: 'call_1_s2', error_kind: 'outcome_unknown' });
    expect(log.filter((e) => e.type === 'TOOL_CALLED' && e.payload.step_id === 's2')).toHaveLength(1);
    expect(log.filter((e) => e.type === 'TOOL_CALLED' && e.payload.step_id === 's3')).toHaveLength(0);
    expect(log.find((e) => e.type === 'PLAN_FAILED')?.payload).toMatchObject({ failed_step: 's2' });
    expect(lines().filter((l) => l === 'one')).toHaveLength(1);
    expect(lines()).not.toContain('three');
  });

  it('resume leaves a task another live process runs to it, naming that process; rebuild is refused beside it', async () => {
    // the running task's step lasts until the test writes `go` (at most a minute): it runs for as long as the checks take
    writeFileSync(
      join(dir, 'script.json'),
      json({
        orchestrator: [
          json({
            type: 'plan',
            steps: [sh('hold', 'for i in $(seq 1200); do [ -e go ] && exit 0; sleep 0.05; done; exit 1')],
          }),
          json({ type: 'respond', content: 'slow answer' }),
        ],
      }),
    );
    const running = spawnCli(['run', 'think slowly', '--yes'], { cwd: dir, env });
    const holding = (log: RuntimeEvent[]) =>
      log.some((e) => e.type === 'TOOL_CALLED' && e.payload.step_id === 'hold');
    for (let i = 0; i < 800 && !holding(await events()); i++) await new Promise((r) => setTimeout(r, 25));
    const taskId = (await events())[0].task_id;
    // longer than the lease's TTL: the running process's heartbeat keeps it
    await new Promise((r) => setTimeout(r, LEASE_TTL_MS * 2));

    // at once: each CLI takes seconds to boot, and the running task must still be running for all three
    const [all, refused, rebuild] = await Promise.all([
      runCli(['resume', '--yes'], { cwd: dir, env }),
      runCli(['resume', taskId, '--yes'], { cwd: dir, env }),
      runCli(['rebuild'], { cwd: dir, env }),
    ]);
    expect(all.code).toBe(0);
    expect(all.stderr).toContain('resuming 0 unfinished task(s)');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`not resuming ${taskId}: runledger process `);
    expect(refused.stderr).toContain(`:${running.child.pid}:`);
    expect(refused.stderr).toContain('pass --force to take the task over');
    expect((await events()).some((e) => e.type === 'GUARD_TRIGGERED')).toBe(false);
    expect(rebuild.code).toBe(1);
    expect(rebuild.stderr).toContain('not rebuilding: another runledger process has this database open');
    expect(running.child.exitCode).toBeNull();

    writeFileSync(join(dir, 'go'), '');
    const done = await running.done;
    expect(done.code).toBe(0);
    const log = await events();
    expect(log[log.length - 1]).toMatchObject({ type: 'TASK_COMPLETED', payload: { result: 'slow answer' } });
    // run once, by the process that started it: nothing taken over, nothing run again
    expect(log.some((e) => e.type === 'GUARD_TRIGGERED')).toBe(false);
    expect(log.filter((e) => e.type === 'TOOL_CALLED')).toHaveLength(1);
    expect(log.filter((e) => e.type === 'TOOL_COMPLETED')).toHaveLength(1);
    expect(log.filter((e) => e.type === 'MODEL_CALLED')).toHaveLength(2);
    const after = await runCli(['resume'], { cwd: dir, env });
    expect(after.stderr).toContain('resuming 0 unfinished task(s)');
    expect(after.code).toBe(0);
  }, 90_000);
});
