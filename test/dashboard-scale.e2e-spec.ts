/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Browser } from 'playwright-core';
import { NewEvent, emptyUsage } from '@runledger/contracts';
import { createSqliteStorage } from '@runledger/state-store';
import { ApiHarness, TOKENS, bootApi, launchChromium } from './api-harness';

const ARTIFACTS = resolve(__dirname, '..', 'test-artifacts');
const TASKS = 100;
const CHUNKS = 998; // + TASK_RECEIVED + TASK_COMPLETED = 1000 events a task, 100k in all

/** 100 finished tasks of 1000 events each, written straight to the store before the server boots. */
async function seed(dbPath: string): Promise<void> {
  const storage = await createSqliteStorage({ path: dbPath, synchronous: 'OFF' });
  try {
    for (let t = 0; t < TASKS; t++) {
      const taskId = `task_seed_${String(t).padStart(3, '0')}`;
      const events: NewEvent[] = [
        { type: 'TASK_RECEIVED', payload: { input: `seeded ${t}`, session_id: 'sess_seed' } } as NewEvent,
      ];
      for (let i = 0; i < CHUNKS; i++)
        events.push({
          type: 'OUTPUT_CHUNK',
          payload: { call_id: 'call_1', index: i, delta: `chunk ${i} of task ${t}` },
        } as NewEvent);
      events.push({
        type: 'TASK_COMPLETED',
        payload: { stop_reason: 'completed', detail: 'seeded', usage: emptyUsage(), result: 'ok' },
      } as NewEvent);
      await storage.eventStore.append(taskId, events, { expected: 'no_stream' });
    }
  } finally {
    await storage.close();
  }
}

describe('admin dashboard with 100k events in the log (e2e, headless Chromium)', () => {
  let sut: ApiHarness;
  let browser: Browser;

  beforeAll(async () => {
    sut = await bootApi({}, { beforeBoot: seed, checkResponses: true });
    browser = await launchChromium();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await sut?.close();
  });

  it('loads the newest page, pages back through all 100k, filters, and keeps the DOM small', async () => {
    const head = (await sut.request('GET', '/admin/events?limit=1')).body.head_position;
    expect(head).toBe(TASKS * (CHUNKS + 2));
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    sut.watch(page);
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    const timings: Record<string, number> = {};
    const timed = async (name: string, f: () => Promise<unknown>) => {
      const t0 = Date.now();
      await f();
      timings[name] = Date.now() - t0;
    };

    await page.goto(`${sut.url}/admin#token=${TOKENS.admin}`);
    await timed('open event log (newest 1000 over WebSocket)', async () => {
      await page.click('#nav-events');
      await page.waitForFunction(
        (h) =>
          document.querySelector('#ev-count')?.textContent?.includes('/ 1000 loaded') &&
          document.querySelector('#ev-rows .evrow:last-child')?.textContent?.startsWith(`#${h} `),
        head,
      );
    });
    await timed('page back to the first event (20 clicks of 5 pages of 1000)', async () => {
      for (let loaded = 1000; loaded < head; loaded = Math.min(head, loaded + 5000)) {
        await page.click('#ev-older');
        await page.waitForFunction(
          (n) => document.querySelector('#ev-count')?.textContent?.endsWith(`/ ${n} loaded`),
          Math.min(head, loaded + 5000),
          { timeout: 30_000 },
        );
      }
    });
    const domRows = await page.$$eval('#ev-rows .evrow', (rows) => rows.length);
    expect(domRows).toBeGreaterThan(0);
    expect(domRows).toBeLessThan(100);

    await timed('filter 100k by type', async () => {
      await page.selectOption('#ev-type', 'TASK_COMPLETED');
      await page.waitForFunction(
        (n) => document.querySelector('#ev-count')?.textContent === `${n} shown / ${n * 1000} loaded`,
        TASKS,
      );
    });
    await timed('filter 100k by task', async () => {
      await page.selectOption('#ev-type', '');
      await page.fill('#ev-task', 'task_seed_042');
      await page.waitForFunction(() =>
        document.querySelector('#ev-count')?.textContent?.startsWith('1000 shown'),
      );
    });
    await timed('scroll to the middle', async () => {
      await page.fill('#ev-task', '');
      await page.waitForFunction(
        (n) => document.querySelector('#ev-count')?.textContent?.startsWith(`${n} shown`),
        head,
      );
      await page.$eval('#ev-viewport', (vp) => (vp.scrollTop = vp.scrollHeight / 2));
      await page.waitForFunction(() =>
        document.querySelector('#ev-rows .evrow')?.textContent?.startsWith('#4'),
      );
    });
    expect(await page.$$eval('#ev-rows .evrow', (rows) => rows.length)).toBeLessThan(100);
    expect(errors).toEqual([]);

    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-100k-events.png') });
    writeFileSync(
      join(ARTIFACTS, 'dashboard-100k-timings.json'),
      JSON.stringify({ events: head, dom_rows: domRows, ms: timings }, null, 2),
    );
  }, 180_000);

  it("answered every request above, its own and the dashboard's, as the OpenAPI document describes it", async () => {
    expect(await sut.checkedMismatches()).toEqual([]);
  });
});
