import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli, waitForSignalStep, writePlanScript } from '@runledger/testing';
import { ApiHarness, bootApi } from './api-harness';

/**
 * `runledger schedules ...` (real child processes) on the database a running server uses: a schedule
 * the CLI creates is the server's (same events in system:schedules) and its slots fire there; pause,
 * list and delete from the CLI are what the server shows; bad input writes nothing (each spawn boots
 * the runtime: resume and get are the same path, covered through the API and the parser's spec).
 */
jest.setTimeout(120_000);

interface View {
  schedule_id: string;
  paused: boolean;
  name?: string;
  cron: string;
  time_zone: string;
  overlap: string;
  catch_up: string;
  budgets?: Record<string, number>;
  tasks_started: number;
}

describe('runledger schedules', () => {
  let api: ApiHarness;
  let env: Record<string, string>;
  let scriptDir: string;
  const cli = (args: string[]) => runCli(['schedules', ...args], { cwd: api.dir, env });

  beforeAll(async () => {
    // every task waits for signal `ci`, then answers
    scriptDir = mkdtempSync(join(tmpdir(), 'rl-sched-cli-'));
    const script = writePlanScript(scriptDir, [waitForSignalStep('ci')], 'answered after ci');
    env = { RUNLEDGER_MODEL: `scripted:${script}`, RUNLEDGER_MEMORY: 'off', RUNLEDGER_CRITIC: 'off' };
    api = await bootApi(env);
    env.RUNLEDGER_DB = join(api.dir, 'runledger.db');
  });
  afterAll(async () => {
    await api.close();
    rmSync(scriptDir, { recursive: true, force: true });
  });

  it('creates, pauses, lists and deletes what the server sees and fires', async () => {
    const bad = await cli(['create', '61 * * * *', 'never']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/minute/);
    expect((await api.request('GET', '/schedules')).body.schedules).toEqual([]);

    const created = await cli([
      'create',
      '* * * * * *',
      'tick at {{time}}',
      '--name',
      'every second',
      '--time-zone',
      'Europe/Berlin',
      '--overlap',
      'allow',
      '--catch-up',
      'run_once',
      '--budget',
      'max_rounds=2',
      '--json',
    ]);
    expect(created.code).toBe(0);
    const view = (JSON.parse(created.stdout) as { schedule: View }).schedule;
    expect(view).toMatchObject({
      name: 'every second',
      cron: '* * * * * *',
      time_zone: 'Europe/Berlin',
      overlap: 'allow',
      catch_up: 'run_once',
      budgets: { max_rounds: 2 },
      paused: false,
    });
    const id = view.schedule_id;

    // the server's scheduler fires the CLI's schedule
    for (const deadline = Date.now() + 20_000; ;) {
      const s = (await api.request('GET', `/schedules/${id}`)).body as View;
      if (s.tasks_started >= 1) break;
      if (Date.now() > deadline) throw new Error('the server never fired the schedule');
      await new Promise((r) => setTimeout(r, 200));
    }

    const paused = await cli(['pause', id]);
    expect(paused.code).toBe(0);
    expect(paused.stdout).toContain(`schedule ${id} (every second): paused`);
    expect((await api.request('GET', `/schedules/${id}`)).body.paused).toBe(true);

    const list = await cli(['list']);
    expect(list.code).toBe(0);
    expect(list.stdout.trim()).toMatch(
      new RegExp(`^${id}\\s+paused\\s+\\* \\* \\* \\* \\* \\* \\(Europe/Berlin\\)`),
    );
    expect(list.stdout).toContain('every second');

    const deleted = await cli(['delete', id]);
    expect(deleted.code).toBe(0);
    expect(deleted.stderr).toContain(`schedule ${id} deleted`);
    expect((await api.request('GET', `/schedules/${id}`)).status).toBe(404);
  });

  it('runledger signal wakes a task the server holds waiting, and follows it to its end', async () => {
    const taskId: string = (await api.request('POST', '/tasks', { body: { input: 'wait for ci' } })).body
      .task_id;
    for (const deadline = Date.now() + 20_000; ;) {
      if ((await api.request('GET', `/tasks/${taskId}`)).body.waiting_for?.kind === 'signal') break;
      if (Date.now() > deadline) throw new Error('the task never waited for its signal');
      await new Promise((r) => setTimeout(r, 100));
    }
    const sent = await runCli(['signal', taskId, 'ci', '{"build":7}', '--id', 'ci-7'], { cwd: api.dir, env });
    expect(sent.stderr).toMatch(/signal ci recorded as ci-7; taken by wait/);
    expect(sent.code).toBe(0);
    expect(sent.stdout).toContain('answered after ci');
    const task = (await api.request('GET', `/tasks/${taskId}`)).body;
    expect(task.status).toBe('completed');
    const events = (await api.request('GET', `/tasks/${taskId}/events?limit=1000`)).body.events as {
      type: string;
      payload: Record<string, unknown>;
    }[];
    expect(events.filter((e) => e.type === 'SIGNAL_RECEIVED').map((e) => e.payload)).toEqual([
      { signal_id: 'ci-7', name: 'ci', payload: { build: 7 } },
    ]);
  });
});
