/// <reference lib="dom" />
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Browser, Page } from 'playwright-core';
import { ApiHarness, TOKENS, bootApi, launchChromium, waitForTask } from './api-harness';

type Event = { type: string; sequence: number; payload: Record<string, unknown> };

/**
 * The round policy through the server and its dashboard: a person widens a task's surface from the
 * submit form or by running a refused task again with changes allowed, recorded like the API's
 * allow_mutation (sys_util turns `run <cmd>` into shell_exec).
 */
describe('round policy: widening from the dashboard (e2e, headless Chromium)', () => {
  let sut: ApiHarness;
  let browser: Browser;
  let page: Page;
  const errors: string[] = [];

  beforeAll(async () => {
    sut = await bootApi({ RUNLEDGER_ROUND_POLICY: 'on' }, { checkResponses: true });
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    sut.watch(page);
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${sut.url}/admin#token=${encodeURIComponent(TOKENS.admin)}`);
    await page.waitForSelector('#view-tasks:not([hidden])');
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await sut?.close();
  });

  const events = async (taskId: string): Promise<Event[]> =>
    (await sut.request('GET', `/tasks/${taskId}/events?limit=1000`)).body.events;
  const shownTask = async (other?: string): Promise<string> => {
    await page.waitForFunction((id) => {
      const shown = document.querySelector('#t-id')?.textContent;
      return Boolean(shown) && shown !== id && location.hash === `#/tasks/${shown}`;
    }, other ?? null);
    return (await page.textContent('#t-id'))!.trim();
  };
  const approveAll = async (taskId: string) => {
    const t = await waitForTask(sut, taskId, (s) => s === 'awaiting_permission');
    for (const p of t.pending)
      await sut.request('POST', `/tasks/${taskId}/permissions/${p.request_id}`, {
        body: { decision: 'allow_once' },
      });
    return waitForTask(sut, taskId);
  };

  it("a refused change is run again with changes allowed from the task page: the fork records the person's decision and may write", async () => {
    await page.fill('#submit-input', 'run touch widened.txt');
    await page.click('#submit-button');
    await page.waitForSelector('#view-task:not([hidden])');
    const refused = await shownTask();
    expect((await waitForTask(sut, refused)).status).toBe('failed');
    // sys_util gives up after the refusal: the command was not offered and never ran
    expect(
      (await events(refused)).filter((e) => e.type === 'TOOL_FAILED').map((e) => e.payload.error),
    ).toEqual([expect.stringMatching(/^not_offered: "touch widened.txt" is not a read-only command/)]);
    expect((await events(refused)).some((e) => e.type === 'TOOL_CALLED')).toBe(false);
    expect(existsSync(join(sut.workspace, 'widened.txt'))).toBe(false);
    await page.waitForSelector('#t-changes:not([hidden])');
    expect(await page.textContent('#t-changes-text')).toMatch(
      /^not allowed: .* \(classified from the input\)$/,
    );

    await page.click('#t-widen');
    const fork = await shownTask(refused);
    const [received] = await events(fork);
    expect(received.payload).toMatchObject({
      source: 'fork',
      forked_from: { task_id: refused, sequence: 1 },
      mutation_intent: { allowed: true, decided_by: 'person' },
    });
    const ended = await approveAll(fork);
    expect(ended).toMatchObject({ status: 'completed' });
    expect(existsSync(join(sut.workspace, 'widened.txt'))).toBe(true);
    await page.waitForFunction(() => document.querySelector('#t-status')?.textContent === 'completed');
    expect(await page.textContent('#t-changes-text')).toMatch(/^allowed: .* \(a person decided\)$/);
    expect(await page.isHidden('#t-widen')).toBe(true);
  });

  it('"allow changes" on the submit form records the widening in TASK_RECEIVED, as allow_mutation does', async () => {
    await page.goto(`${sut.url}/admin#/tasks`);
    await page.waitForSelector('#view-tasks:not([hidden])');
    await page.fill('#submit-input', 'run touch checked.txt');
    await page.check('#submit-write');
    await page.click('#submit-button');
    await page.waitForSelector('#view-task:not([hidden])');
    const task = await shownTask();
    const [received] = await events(task);
    expect(received.payload).toMatchObject({
      mutation_intent: {
        allowed: true,
        reason: 'a person allowed changes for this task (allow_mutation)',
        decided_by: 'person',
      },
    });
    expect(await approveAll(task)).toMatchObject({ status: 'completed' });
    expect(existsSync(join(sut.workspace, 'checked.txt'))).toBe(true);
    // the form forgets the choice: the next task is classified from its input again
    expect(await page.isChecked('#submit-write')).toBe(false);
    expect(errors).toEqual([]);
    expect(await sut.checkedMismatches()).toEqual([]);
  });

  it('a fork with allow_mutation that is not a boolean is refused with 400 and starts nothing', async () => {
    const { task_id } = (await sut.request('POST', '/tasks', { body: { input: 'run echo hi' } })).body;
    await waitForTask(sut, task_id);
    const before = (await sut.request('GET', '/tasks?limit=100')).body.tasks.length;
    const res = await sut.request('POST', `/tasks/${task_id}/fork`, {
      body: { at_sequence: 1, allow_mutation: 'yes' },
    });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: expect.any(String), message: expect.any(String) });
    expect((await sut.request('GET', '/tasks?limit=100')).body.tasks.length).toBe(before);
  });
});
