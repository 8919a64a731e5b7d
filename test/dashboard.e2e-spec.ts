/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Browser } from 'playwright-core';
import { ApiHarness, TOKENS, bootApi, waitForTask, launchChromium } from './api-harness';

const ARTIFACTS = resolve(__dirname, '..', 'test-artifacts');
/** sys_util turns `run <cmd>` into shell_exec; the permission policy prompts before a command that writes. */
const NEEDS_PERMISSION = 'run touch approved-by-browser.txt';

describe('admin dashboard in headless Chromium (e2e)', () => {
  let sut: ApiHarness;
  let browser: Browser;

  beforeAll(async () => {
    sut = await bootApi({}, { checkResponses: true });
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await sut?.close();
  });

  it('serves each of its ES modules without a token, and nothing beside them', async () => {
    for (const file of [
      'app.js',
      'core.js',
      'event-log.js',
      'tasks-page.js',
      'approvals-page.js',
      'task-page.js',
      'charts-page.js',
      'schedules-page.js',
    ]) {
      const res = await fetch(`${sut.url}/admin/static/${file}`);
      expect([file, res.status, res.headers.get('content-type')]).toEqual([
        file,
        200,
        'text/javascript; charset=utf-8',
      ]);
    }
    for (const file of ['missing.js', '.hidden.js', '..%2Fdashboard.controller.js', 'README.md'])
      expect([file, (await fetch(`${sut.url}/admin/static/${file}`)).status]).toEqual([file, 404]);
  });

  it('signs in, submits a task that needs a permission, approves it and sees it complete', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    sut.watch(page);
    const consoleErrors: string[] = [];
    page.on('pageerror', (e) => consoleErrors.push(e.message));
    await page.goto(`${sut.url}/admin`);
    await page.fill('#token-input', TOKENS.admin);
    await page.click('#token-form button[type=submit]');
    await page.waitForSelector('#view-tasks:not([hidden])');
    await page.waitForSelector('#conn.on');
    expect(await page.evaluate(() => sessionStorage.getItem('runledger.token'))).toBe(TOKENS.admin);

    await page.fill('#submit-input', NEEDS_PERMISSION);
    await page.click('#submit-button');
    await page.waitForSelector('#view-task:not([hidden])');
    const taskId = (await page.textContent('#t-id'))!.trim();
    expect(taskId).toMatch(/\S+/);
    await page.waitForFunction(
      (input) => document.querySelector('#t-input')?.textContent === input,
      NEEDS_PERMISSION,
    );

    await page.waitForSelector('#t-pending .pending button.approve', { timeout: 15_000 });
    expect(await page.textContent('#t-status')).toBe('awaiting_permission');
    // before "Always allow" is pressed, the card says what it would let through
    const covers = await page.textContent('#t-pending .pending .covers');
    expect(covers).toMatch(/^allow always: shell_exec, .+, for this session \(rule [a-z_]+\)$/);
    expect(await page.getAttribute('#t-pending .pending button.approve-always', 'title')).toBe(covers);
    // live events are appended to the timeline: the items already shown stay the same nodes
    await page.$eval('#t-timeline li', (li) => li.setAttribute('data-probe', 'kept'));
    await page.click('#t-pending .pending button.approve');

    await page.waitForFunction(
      () => document.querySelector('#t-status')?.textContent === 'completed',
      undefined,
      { timeout: 15_000 },
    );
    await page.waitForFunction(() =>
      [...document.querySelectorAll('#t-timeline summary')].some((s) =>
        s.textContent?.includes('TASK_COMPLETED'),
      ),
    );
    expect(await page.getAttribute('#t-timeline li:first-child', 'data-probe')).toBe('kept');
    const task = await waitForTask(sut, taskId);
    expect(task.status).toBe('completed');
    expect(existsSync(join(sut.workspace, 'approved-by-browser.txt'))).toBe(true);
    const resolved = (await sut.request('GET', `/admin/events?type=PERMISSION_RESOLVED&task_id=${taskId}`))
      .body.events;
    expect(resolved).toHaveLength(1);
    expect(resolved[0].payload.decision).toBe('allow_once');
    expect(await page.textContent('#t-pending')).toContain('none');

    const timelineTypes = await page.$$eval('#t-timeline summary', (els) =>
      els.map((e) => e.textContent ?? ''),
    );
    const events = (await sut.request('GET', `/tasks/${taskId}/events?limit=1000`)).body.events;
    expect(timelineTypes).toHaveLength(events.length);

    mkdirSync(ARTIFACTS, { recursive: true });
    const shot = join(ARTIFACTS, 'dashboard-task-approved.png');
    await page.screenshot({ path: shot, fullPage: true });
    expect(statSync(shot).size).toBeGreaterThan(10_000);

    await page.click('#nav-events');
    await page.waitForSelector('#view-events:not([hidden])');
    await page.fill('#ev-task', taskId);
    await page.waitForFunction(
      (n) => document.querySelectorAll('#ev-rows .evrow').length === n,
      events.length,
    );
    await page.selectOption('#ev-type', 'PERMISSION_RESOLVED');
    await page.waitForFunction(() => document.querySelectorAll('#ev-rows .evrow').length === 1);
    await page.click('#ev-rows .evrow');
    expect(await page.textContent('#ev-detail')).toContain('"decision": "allow_once"');
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-event-log.png') });

    await page.click('#nav-tasks');
    await page.waitForSelector(`tr[data-task="${taskId}"]`);
    expect(await page.textContent(`tr[data-task="${taskId}"]`)).toContain('completed');
    expect(consoleErrors).toEqual([]);
  }, 60_000);

  it('answers a secret request with the Provide-secret control; the value never reaches the page or the log', async () => {
    const secret = 'browser-secret-5f1e';
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    sut.watch(page);
    await page.goto(`${sut.url}/admin#token=${encodeURIComponent(TOKENS.admin)}`);
    await page.waitForSelector('#view-tasks:not([hidden])');
    await page.fill('#submit-input', 'run sudo -n true');
    await page.click('#submit-button');
    await page.waitForSelector('#t-pending .pending button.approve', { timeout: 15_000 });
    await page.click('#t-pending .pending button.approve');
    await page.waitForSelector('#t-pending .pending button.provide-secret', { timeout: 15_000 });
    expect(await page.textContent('#t-status')).toBe('awaiting_secret');
    expect(await page.textContent('#t-pending .pending')).toContain('sudo_password');
    const requestId = await page.getAttribute('#t-pending .pending', 'data-request');
    await page.fill('#t-pending .pending input[type=password]', secret);
    await page.click('#t-pending .pending button.provide-secret');
    const taskId = (await page.textContent('#t-id'))!.trim();
    await page.waitForFunction(
      () =>
        [...document.querySelectorAll('#t-timeline summary')].some((s) =>
          s.textContent?.includes('SECRET_PROVIDED'),
        ),
      undefined,
      { timeout: 15_000 },
    );
    // sudo may ask again (a wrong password); the request answered here is no longer pending either way
    const state = (await sut.request('GET', `/tasks/${taskId}`)).body;
    expect(state.pending.map((p: { request_id: string }) => p.request_id)).not.toContain(requestId);
    const events = (await sut.request('GET', `/tasks/${taskId}/events?limit=1000`)).body.events;
    expect(events).toContainEqual(
      expect.objectContaining({
        type: 'SECRET_PROVIDED',
        payload: expect.objectContaining({ request_id: requestId }),
      }),
    );
    expect(JSON.stringify(events)).not.toContain(secret);
    expect(await page.content()).not.toContain(secret);
    expect(sut.logs.join('')).not.toContain(secret);
  }, 45_000);

  it('denies one request and cancels another task from the task page', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    sut.watch(page);
    await page.goto(`${sut.url}/admin#token=${encodeURIComponent(TOKENS.admin)}`);
    await page.waitForSelector('#view-tasks:not([hidden])');
    await page.fill('#submit-input', 'run touch denied-by-browser.txt');
    await page.click('#submit-button');
    await page.waitForSelector('#t-pending .pending button.deny', { timeout: 15_000 });
    const denied = (await page.textContent('#t-id'))!.trim();
    await page.click('#t-pending .pending button.deny');
    const deniedTask = await waitForTask(sut, denied);
    expect(existsSync(join(sut.workspace, 'denied-by-browser.txt'))).toBe(false);
    const resolution = (await sut.request('GET', `/admin/events?type=PERMISSION_RESOLVED&task_id=${denied}`))
      .body.events;
    expect(resolution.map((e: { payload: { decision: string } }) => e.payload.decision)).toEqual(['deny']);
    await page.waitForFunction(
      (s) => document.querySelector('#t-status')?.textContent === s,
      deniedTask.status,
    );

    await page.click('#nav-tasks');
    await page.fill('#submit-input', 'run touch cancelled-by-browser.txt');
    await page.click('#submit-button');
    await page.waitForSelector('#t-pending .pending button.approve', { timeout: 15_000 });
    const cancelled = (await page.textContent('#t-id'))!.trim();
    await page.click('#t-cancel');
    await page.waitForFunction(
      () => document.querySelector('#t-status')?.textContent === 'cancelled',
      undefined,
      {
        timeout: 15_000,
      },
    );
    expect((await waitForTask(sut, cancelled)).stop_reason).toBe('cancelled');
    expect(await page.isHidden('#t-cancel')).toBe(true);
  }, 45_000);

  it('draws the plan DAG with step states and edges', async () => {
    const taskId = (
      await sut.request('POST', '/tasks', { body: { input: 'run echo first then run echo second' } })
    ).body.task_id;
    const task = await waitForTask(sut, taskId);
    expect(task.status).toBe('completed');
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    sut.watch(page);
    await page.goto(`${sut.url}/admin#token=${encodeURIComponent(TOKENS.admin)}`);
    await page.waitForSelector('#view-tasks:not([hidden])');
    await page.goto(`${sut.url}/admin#/tasks/${taskId}`);
    await page.waitForSelector('svg.dag');
    const plan = (await sut.request('GET', `/admin/events?type=PLAN_STARTED&task_id=${taskId}`)).body
      .events[0].payload;
    const steps = await page.$$eval('svg.dag g[data-step]', (gs) =>
      gs.map((g) => [g.getAttribute('data-step'), g.getAttribute('data-state')]),
    );
    expect(steps).toEqual(plan.steps.map((s: { id: string }) => [s.id, 'completed']));
    const edges = plan.steps.reduce((n: number, s: { depends_on: string[] }) => n + s.depends_on.length, 0);
    expect(edges).toBeGreaterThan(0);
    expect(await page.$$eval('svg.dag line', (ls) => ls.length)).toBe(edges);
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-plan-dag.png'), fullPage: true });
  });

  it('"fork from here" on a timeline event starts a fork from that event and opens it', async () => {
    const source = (await sut.request('POST', '/tasks', { body: { input: 'run echo fork-me' } })).body
      .task_id;
    expect((await waitForTask(sut, source)).status).toBe('completed');
    const events = (await sut.request('GET', `/tasks/${source}/events?limit=1000`)).body.events;
    const at = events.find((e: { type: string }) => e.type === 'TOOL_COMPLETED').sequence;
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    sut.watch(page);
    const consoleErrors: string[] = [];
    page.on('pageerror', (e) => consoleErrors.push(e.message));
    await page.goto(`${sut.url}/admin#token=${encodeURIComponent(TOKENS.admin)}`);
    await page.waitForSelector('#view-tasks:not([hidden])');
    await page.goto(`${sut.url}/admin#/tasks/${source}`);
    await page.waitForSelector(`#t-timeline li[data-seq="${at}"] button.fork`);
    expect(await page.isHidden('#t-forked')).toBe(true);

    await page.click(`#t-timeline li[data-seq="${at}"] button.fork`);
    await page.waitForFunction((id) => {
      const shown = document.querySelector('#t-id')?.textContent;
      return Boolean(shown) && shown !== id && location.hash === `#/tasks/${shown}`;
    }, source);
    const fork = (await page.textContent('#t-id'))!.trim();
    await page.waitForFunction(() => document.querySelector('#t-status')?.textContent === 'completed');
    // the state and the events load one after the other: the link comes with the events
    await page.waitForSelector('#t-forked:not([hidden])');
    expect(await page.textContent('#t-forked')).toBe(`${source} at event ${at}`);
    const [received] = (await sut.request('GET', `/tasks/${fork}/events?limit=1`)).body.events;
    expect(received.payload).toMatchObject({
      source: 'fork',
      forked_from: { task_id: source, sequence: at },
    });
    expect((await waitForTask(sut, fork)).result).toBe((await waitForTask(sut, source)).result);

    await page.click('#t-forked a');
    await page.waitForFunction((id) => document.querySelector('#t-id')?.textContent === id, source);
    expect(consoleErrors).toEqual([]);
  });

  it('subscribes the live log once when the page is ready before the socket is authenticated', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    sut.watch(page);
    const consoleErrors: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error') consoleErrors.push(m.text());
    });
    const fromPage: Array<{ type: string; subscription_id?: string }> = [];
    const toPage: Array<{ type: string; message?: string }> = [];
    let authSent!: () => void;
    const socketOpen = new Promise<void>((r) => (authSent = r));
    let releaseAuth!: () => void;
    const authHeld = new Promise<void>((r) => (releaseAuth = r));
    // Order forced here: the socket opens and sends auth; the log head arrives; the page
    // subscribes; only then does the server's "authenticated" reply reach the page.
    await page.routeWebSocket(/\/ws$/, (ws) => {
      const server = ws.connectToServer();
      ws.onMessage((m) => {
        const msg = JSON.parse(String(m));
        fromPage.push(msg);
        if (msg.type === 'auth') authSent();
        server.send(m);
      });
      let chain = Promise.resolve();
      server.onMessage((m) => {
        chain = chain.then(async () => {
          const msg = JSON.parse(String(m));
          if (msg.type === 'authenticated') await authHeld;
          toPage.push(msg);
          ws.send(m);
        });
      });
    });
    await page.route(/\/admin\/events\?limit=1$/, async (route) => {
      await socketOpen;
      await route.continue();
    });
    const headLoaded = page.waitForResponse((r) => r.url().includes('/admin/events?limit=1'));
    await page.goto(`${sut.url}/admin#token=${encodeURIComponent(TOKENS.admin)}`);
    await headLoaded;
    await page.evaluate(() => new Promise((r) => setTimeout(r, 300)));
    releaseAuth();
    await page.waitForSelector('#conn.on');
    const subscribes = () => fromPage.filter((m) => m.type.startsWith('subscribe'));
    const replies = () => toPage.filter((m) => m.type === 'subscribed' || m.type === 'error');
    // wait until every subscribe the page sent has been answered
    for (let i = 0; i < 200 && (subscribes().length === 0 || replies().length < subscribes().length); i++)
      await page.evaluate(() => new Promise((r) => setTimeout(r, 25)));
    expect(toPage.filter((m) => m.type === 'error')).toEqual([]);
    expect(subscribes().map((m) => [m.type, m.subscription_id])).toEqual([['subscribe_all', 'log']]);
    expect(await page.isHidden('#flash')).toBe(true);
    expect(consoleErrors).toEqual([]);
  });

  it('opens the API docs (Swagger UI, no token needed) from the dashboard without asking for anything', async () => {
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      sut.watch(page);
      await page.goto(`${sut.url}/admin#token=${encodeURIComponent(TOKENS.admin)}`);
      await page.waitForSelector('#view-tasks:not([hidden])');
      const dialogs: string[] = [];
      context.on('page', (p) =>
        p.on('dialog', (d) => {
          dialogs.push(d.message());
          void d.dismiss();
        }),
      );
      const [docs] = await Promise.all([context.waitForEvent('page'), page.click('header >> text=API docs')]);
      const operation = docs.locator(
        '.opblock-summary-path[data-path="/tasks/{task_id}/permissions/{request_id}"]',
      );
      await operation.waitFor();
      expect(await docs.locator('.opblock').count()).toBeGreaterThanOrEqual(13);
      expect(dialogs).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('rejects a wrong token at the sign-in form', async () => {
    const page = await browser.newPage();
    sut.watch(page);
    await page.goto(`${sut.url}/admin`);
    await page.fill('#token-input', 'not-the-right-token-at-all');
    await page.click('#token-form button[type=submit]');
    await page.waitForFunction(() => (document.querySelector('#login-error')?.textContent ?? '').length > 0);
    expect(await page.isHidden('#app')).toBe(true);
    expect(await page.evaluate(() => sessionStorage.getItem('runledger.token'))).toBeNull();
  });

  it("answered every request above, its own and the dashboard's, as the OpenAPI document describes it", async () => {
    expect(await sut.checkedMismatches()).toEqual([]);
  });
});
