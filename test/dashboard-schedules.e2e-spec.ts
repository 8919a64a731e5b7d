/// <reference lib="dom" />
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Browser } from 'playwright-core';
import { waitForSignalStep, writePlanScript } from '@runledger/testing';
import { ApiHarness, TOKENS, bootApi, launchChromium } from './api-harness';

/**
 * The dashboard's schedules page in headless Chromium: create a schedule from the form (a bad cron
 * expression is refused with the server's message), see it fire, pause, resume and delete it; the
 * tasks that wait for a signal are listed with what they wait for, and a signal sent from the task
 * page wakes one.
 */
jest.setTimeout(90_000);

describe('dashboard: schedules and waiting tasks (e2e)', () => {
  let sut: ApiHarness;
  let browser: Browser;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rl-dash-sched-'));
    // every task waits for signal `ci`, then answers
    const script = writePlanScript(dir, [waitForSignalStep('ci')]);
    sut = await bootApi(
      { RUNLEDGER_MODEL: `scripted:${script}`, RUNLEDGER_MEMORY: 'off', RUNLEDGER_CRITIC: 'off' },
      { checkResponses: true },
    );
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await sut?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('creates, watches, pauses, resumes and deletes a schedule; lists a task waiting for a signal and wakes it', async () => {
    const waiting: string = (await sut.request('POST', '/tasks', { body: { input: 'wait for CI' } })).body
      .task_id;
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    sut.watch(page);
    const pageErrors: string[] = [];
    page.on('pageerror', (e) => pageErrors.push(e.message));
    page.on('dialog', (d) => void d.accept());
    await page.goto(`${sut.url}/admin#token=${TOKENS.admin}`);
    await page.waitForSelector('#view-tasks:not([hidden])');
    await page.click('#nav-schedules');
    await page.waitForSelector('#view-schedules:not([hidden])');
    await page.waitForSelector('#schedules-body td.muted');

    // the task waiting for its signal is listed with what it waits for
    await page.waitForSelector(
      `#waiting-body tr[data-task="${waiting}"] td.waits-for:has-text("signal ci")`,
      {
        timeout: 20_000,
      },
    );

    // a bad expression: the server's refusal, and nothing created
    await page.fill('#sc-cron', '61 * * * *');
    await page.fill('#sc-input', 'never');
    await page.click('#schedule-create');
    await page.waitForSelector('#flash:not([hidden])');
    expect(await page.textContent('#flash')).toMatch(/400 validation_error: .*minute/);
    expect((await sut.request('GET', '/schedules')).body.schedules).toEqual([]);

    await page.fill('#sc-name', 'every second');
    await page.fill('#sc-cron', '* * * * * *');
    await page.fill('#sc-zone', 'Europe/Berlin');
    await page.fill('#sc-input', 'tick {{time}}');
    await page.selectOption('#sc-overlap', 'allow');
    await page.click('#schedule-create');
    const row = page.locator('#schedules-body tr[data-schedule]');
    await row.waitFor();
    const id = (await row.getAttribute('data-schedule'))!;
    expect(await row.locator('td').nth(0).textContent()).toContain('every second');
    expect(await row.locator('td').nth(1).textContent()).toBe('* * * * * * Europe/Berlin');
    // its slots fire: the page follows the log and shows the latest started slot with its task
    await page.waitForSelector(`#schedules-body tr[data-schedule="${id}"] td.last-firing a`, {
      timeout: 20_000,
    });
    expect(await row.locator('td.last-firing').textContent()).toMatch(/^started \d{4}-/);

    await row.locator('button.pause').click();
    await page.waitForSelector(`#schedules-body tr[data-schedule="${id}"] button.resume`);
    expect((await sut.request('GET', `/schedules/${id}`)).body.paused).toBe(true);
    expect(await row.locator('td.next-slot').textContent()).toBe('-');
    await row.locator('button.resume').click();
    await page.waitForSelector(`#schedules-body tr[data-schedule="${id}"] button.pause`);
    expect((await sut.request('GET', `/schedules/${id}`)).body.paused).toBe(false);
    await row.locator('button.delete').click();
    await page.waitForSelector('#schedules-body td.muted');
    expect((await sut.request('GET', `/schedules/${id}`)).status).toBe(404);

    // the waiting task's page sends the signal it waits for (its name filled in): it completes
    await page.goto(`${sut.url}/admin#/tasks/${waiting}`);
    await page.waitForSelector('#view-task:not([hidden])');
    await page.waitForFunction(
      () => (document.getElementById('t-signal-name') as HTMLInputElement).value === 'ci',
    );
    await page.fill('#t-signal-payload', '{"ok": true}');
    await page.click('#t-signal button[type=submit]');
    await page.waitForSelector('#t-status:has-text("completed")', { timeout: 20_000 });

    expect(pageErrors).toEqual([]);
    expect(await sut.checkedMismatches()).toEqual([]);
    await page.close();
  });
});
