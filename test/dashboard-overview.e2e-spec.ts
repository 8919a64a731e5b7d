/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Browser, Page } from 'playwright-core';
import { NewEvent, TaskUsage, emptyUsage } from '@runledger/contracts';
import { createSqliteStorage } from '@runledger/state-store';
import { ApiHarness, TOKENS, bootApi, launchChromium, waitForTask } from './api-harness';

const ARTIFACTS = resolve(__dirname, '..', 'test-artifacts');

/** Finished tasks with model answers, written to the store before the server boots. */
const SEEDED = [
  {
    id: 'task_seed_deploy',
    input: 'Deploy the billing service\nand watch the error rate',
    session: 'sess_alpha',
    seconds: 2,
    model: 'gpt-small',
    tokens: 120,
    cost: 0.01,
  },
  {
    id: 'task_seed_report',
    input: 'Summarise the quarterly report',
    session: 'sess_alpha',
    seconds: 4,
    model: 'gpt-large',
    tokens: 900,
    cost: 0.2,
  },
  {
    id: 'task_seed_backup',
    input: "Check last night's backups",
    session: 'sess_beta',
    seconds: 6,
    model: 'gpt-small',
    tokens: 80,
    cost: 0.005,
  },
  {
    id: 'task_seed_rotate',
    input: 'Rotate the TLS certificates',
    session: 'sess_beta',
    seconds: 30,
    model: 'gpt-large',
    tokens: 400,
    cost: 0.1,
    failed: true,
  },
];

async function seed(dbPath: string): Promise<void> {
  const storage = await createSqliteStorage({ path: dbPath, synchronous: 'OFF' });
  try {
    const now = Date.now() - 60_000;
    for (const t of SEEDED) {
      const at = (s: number) => new Date(now - (t.seconds - s) * 1000).toISOString();
      const usage: TaskUsage = {
        ...emptyUsage(),
        rounds: 1,
        model_calls: 1,
        prompt_tokens: t.tokens / 2,
        completion_tokens: t.tokens / 2,
        total_tokens: t.tokens,
        cost_usd: t.cost,
      };
      const events = [
        { type: 'TASK_RECEIVED', payload: { input: t.input, session_id: t.session }, created_at: at(0) },
        {
          type: 'MODEL_RESPONDED',
          payload: {
            call_id: 'call_1',
            role: 'orchestrator',
            model: t.model,
            content: 'done',
            usage: { prompt_tokens: t.tokens / 2, completion_tokens: t.tokens / 2, total_tokens: t.tokens },
            latency_ms: 10,
            cost_usd: t.cost,
          },
          created_at: at(1),
        },
        t.failed
          ? {
              type: 'TASK_FAILED',
              payload: { stop_reason: 'tool_error', detail: 'seeded', usage, result: null },
              created_at: at(t.seconds),
            }
          : {
              type: 'TASK_COMPLETED',
              payload: { stop_reason: 'completed', detail: 'seeded', usage, result: 'ok' },
              created_at: at(t.seconds),
            },
      ] as NewEvent[];
      await storage.eventStore.append(t.id, events, { expected: 'no_stream' });
    }
  } finally {
    await storage.close();
  }
}

const shownTasks = (page: Page) =>
  page.$$eval('#tasks-body tr[data-task]', (rows) => rows.map((r) => r.getAttribute('data-task')));

describe('dashboard overview: task list, approvals inbox, charts (e2e, headless Chromium)', () => {
  let sut: ApiHarness;
  let browser: Browser;
  let page: Page;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    sut = await bootApi({}, { beforeBoot: seed, checkResponses: true });
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    sut.watch(page);
    page.on('pageerror', (e) => pageErrors.push(e.message));
    await page.goto(`${sut.url}/admin#token=${encodeURIComponent(TOKENS.admin)}`);
    await page.waitForSelector('#view-tasks:not([hidden])');
    await page.waitForSelector('#conn.on');
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await sut?.close();
  });
  afterEach(() => expect(pageErrors).toEqual([]));

  it("lists tasks newest first by their input's first line, with tokens, cost and session; filters by text and session", async () => {
    await page.waitForFunction(() => document.querySelectorAll('#tasks-body tr[data-task]').length === 4);
    // each seeded task started `seconds` before the same moment: the shortest is the newest
    expect(await shownTasks(page)).toEqual(SEEDED.map((t) => t.id));
    const deploy = await page.$$eval('tr[data-task="task_seed_deploy"] td', (tds) =>
      tds.map((td) => td.textContent),
    );
    expect(deploy[0]).toBe('Deploy the billing servicetask_seed_deploy');
    expect(deploy.slice(1, 3)).toEqual(['completed', 'completed']);
    expect(deploy[4]).toBe('2.0 s');
    expect(deploy.slice(5)).toEqual(['120', '$0.01', 'sess_alpha']);
    expect(await page.textContent('tr[data-task="task_seed_rotate"]')).toContain('tool_error');
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-task-list.png') });

    await page.fill('#task-q', 'QUARTERLY');
    await page.waitForFunction(() => document.querySelectorAll('#tasks-body tr[data-task]').length === 1);
    expect(await shownTasks(page)).toEqual(['task_seed_report']);
    await page.fill('#task-q', 'the');
    await page.waitForFunction(() => document.querySelectorAll('#tasks-body tr[data-task]').length === 3);
    expect(await shownTasks(page)).toEqual(['task_seed_deploy', 'task_seed_report', 'task_seed_rotate']);

    // a session cell narrows the list to its session, on top of the text filter
    await page.click('tr[data-task="task_seed_rotate"] button.session');
    await page.waitForFunction(() => document.querySelectorAll('#tasks-body tr[data-task]').length === 1);
    expect(await page.inputValue('#task-session')).toBe('sess_beta');
    expect(await shownTasks(page)).toEqual(['task_seed_rotate']);
    await page.fill('#task-q', '');
    await page.waitForFunction(() => document.querySelectorAll('#tasks-body tr[data-task]').length === 2);
    expect(await shownTasks(page)).toEqual(['task_seed_backup', 'task_seed_rotate']);
    await page.fill('#task-session', 'sess_nobody');
    await page.waitForSelector('#tasks-body td.muted');
    await page.fill('#task-session', '');
    await page.waitForFunction(() => document.querySelectorAll('#tasks-body tr[data-task]').length === 4);

    // live: a task submitted elsewhere appears on top without a reload
    const live = (await sut.request('POST', '/tasks', { body: { input: 'run echo listed-live' } })).body
      .task_id;
    await page.waitForFunction(
      (id) => document.querySelector('#tasks-body tr[data-task]')?.getAttribute('data-task') === id,
      live,
    );
    expect(await page.textContent(`tr[data-task="${live}"] td.input a`)).toBe('run echo listed-live');
    await waitForTask(sut, live);
  }, 60_000);

  it('gives an approval from the inbox: the request, what "allow always" covers, the count in the header', async () => {
    const taskId = (await sut.request('POST', '/tasks', { body: { input: 'run touch inbox-approved.txt' } }))
      .body.task_id;
    await waitForTask(sut, taskId, (s) => s === 'awaiting_permission');
    await page.waitForFunction(() => document.querySelector('#approvals-count')?.textContent === '1');
    await page.click('#nav-approvals');
    const card = `#approvals-list .pending[data-task="${taskId}"]`;
    await page.waitForSelector(card);
    expect(await page.textContent(`${card} .task a`)).toBe('run touch inbox-approved.txt');
    expect(await page.textContent(`${card} code.concerns`)).toContain('touch inbox-approved.txt');
    expect(await page.textContent(`${card} .covers`)).toMatch(
      /^allow always: shell_exec, .+, for this session/,
    );
    await page.click(`${card} button.approve`);

    const task = await waitForTask(sut, taskId);
    expect(task.status).toBe('completed');
    expect(existsSync(join(sut.workspace, 'inbox-approved.txt'))).toBe(true);
    const resolved = (await sut.request('GET', `/admin/events?type=PERMISSION_RESOLVED&task_id=${taskId}`))
      .body.events;
    expect(resolved.map((e: { payload: { decision: string } }) => e.payload.decision)).toEqual([
      'allow_once',
    ]);
    await page.waitForFunction(() => document.querySelector('#approvals-count')?.textContent === '0');
    await page.waitForSelector('#approvals-list >> text=nothing waits');
  }, 60_000);

  it("shows a tool's output as text: stdout block and exit code", async () => {
    const taskId = (await sut.request('POST', '/tasks', { body: { input: 'run echo printed-by-the-tool' } }))
      .body.task_id;
    await waitForTask(sut, taskId);
    await page.goto(`${sut.url}/admin#/tasks/${taskId}`);
    await page.waitForSelector('#t-timeline .tool-output pre.stdout');
    expect(await page.textContent('#t-timeline .tool-output pre.stdout')).toContain('printed-by-the-tool');
    expect(await page.textContent('#t-timeline .tool-output .exit-code')).toBe('exit code 0');
  });

  it('draws the charts from several tasks: tasks per hour by stop reason, tokens and cost per model, p50/p95', async () => {
    await page.goto(`${sut.url}/admin#/charts`);
    await page.waitForSelector('svg[data-chart="duration-per-day"] rect.bar');
    const stats = (await sut.request('GET', '/admin/stats?days=7')).body;
    const bars = (chart: string) =>
      page.$$eval(`svg[data-chart="${chart}"] rect.bar`, (rects) =>
        rects.map((r) => ({
          series: r.getAttribute('data-series'),
          value: Number(r.getAttribute('data-value')),
        })),
      );
    const sumBy = (rows: Array<{ series: string | null; value: number }>) =>
      rows.reduce<Record<string, number>>(
        (acc, r) => ({ ...acc, [r.series!]: (acc[r.series!] ?? 0) + r.value }),
        {},
      );

    const perHour = sumBy(await bars('tasks-per-hour'));
    expect(perHour.tool_error).toBe(1);
    expect(perHour.completed).toBe(stats.duration.tasks - 1);
    expect(perHour.completed).toBeGreaterThanOrEqual(3);

    expect(sumBy(await bars('tokens-per-day'))).toEqual({ 'gpt-large': 1300, 'gpt-small': 200 });
    const cost = sumBy(await bars('cost-per-day'));
    expect(cost['gpt-large']).toBeCloseTo(0.3);
    expect(cost['gpt-small']).toBeCloseTo(0.015);

    const duration = await bars('duration-per-day');
    expect(duration.map((b) => b.series).sort()).toEqual(['p50', 'p95']);
    expect(duration.find((b) => b.series === 'p50')!.value).toBe(stats.duration.p50_ms);
    expect(duration.find((b) => b.series === 'p95')!.value).toBe(stats.duration.p95_ms);
    expect(stats.duration.p95_ms).toBe(30_000);
    expect(await page.textContent('#charts-summary')).toContain(`${stats.duration.tasks} tasks ended`);

    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-charts.png'), fullPage: true });
  });

  it("answered every request above, its own and the dashboard's, as the OpenAPI document describes it", async () => {
    expect(await sut.checkedMismatches()).toEqual([]);
  });
});
