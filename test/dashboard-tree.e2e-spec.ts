/// <reference lib="dom" />
import { Browser } from 'playwright-core';
import { FakeOpenAiServer, startFakeOpenAiServer } from '@runledger/testing';
import { ApiHarness, TOKENS, bootApi, launchChromium, waitForTask } from './api-harness';

jest.setTimeout(60_000);

const PARENT = 'hand the write to a coder';
const CHILD = 'append a line to tree.txt';

type Body = Record<string, unknown>;
const taskOf = (body: Body): string => {
  const user = (body.messages as { role: string; content: string }[]).find((m) => m.role === 'user')?.content;
  return /## Task\n([\s\S]*)$/.exec(user ?? '')?.[1].trim() ?? '';
};
const answered = (body: Body): boolean =>
  (body.messages as { role: string }[]).some((m) => m.role === 'tool');

describe('dashboard: a task tree (e2e, headless Chromium)', () => {
  let model: FakeOpenAiServer;
  let sut: ApiHarness;
  let browser: Browser;

  beforeAll(async () => {
    model = await startFakeOpenAiServer({ apiKey: 'test-key' });
    // the parent delegates once; the child writes (which asks for permission), then answers
    model.setRoute((body) => {
      const task = taskOf(body);
      if (task === PARENT)
        return answered(body)
          ? { content: 'the coder wrote it' }
          : {
              tool_calls: [
                {
                  id: 'd1',
                  name: 'runledger_delegate',
                  arguments: JSON.stringify({ agent: 'coder', input: CHILD }),
                },
              ],
            };
      if (task === CHILD)
        return answered(body)
          ? { content: 'line appended' }
          : {
              tool_calls: [
                {
                  id: 'w1',
                  name: 'shell_exec',
                  arguments: JSON.stringify({ command: 'echo x >> tree.txt' }),
                },
              ],
            };
      return undefined;
    });
    sut = await bootApi(
      {
        RUNLEDGER_MODEL: 'openai',
        OPENAI_BASE_URL: model.baseURL,
        OPENAI_API_KEY: 'test-key',
        RUNLEDGER_MODEL_ORCHESTRATOR: 'tree-model',
        RUNLEDGER_CRITIC: 'off',
      },
      { checkResponses: true },
    );
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await sut?.close();
    await model?.close();
  });

  it("shows the child's request on the parent, answers it through the child, and links parent and child in the tree", async () => {
    const parentId: string = (await sut.request('POST', '/tasks', { body: { input: PARENT } })).body.task_id;
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    sut.watch(page);
    const pageErrors: string[] = [];
    page.on('pageerror', (e) => pageErrors.push(e.message));
    await page.goto(`${sut.url}/admin`);
    await page.fill('#token-input', TOKENS.admin);
    await page.click('#token-form button[type=submit]');
    await page.waitForSelector('#view-tasks:not([hidden])');
    await page.goto(`${sut.url}/admin#/tasks/${parentId}`);
    await page.waitForSelector('#view-task:not([hidden])');

    // the child's permission request is on the parent's page, naming the child
    await page.waitForSelector('#t-pending .pending button.approve', { timeout: 20_000 });
    const childId = (await page.getAttribute('#t-pending .pending', 'data-task'))!;
    expect(childId).not.toBe(parentId);
    expect(await page.textContent('#t-pending .pending .task')).toContain(childId);
    await page.waitForSelector(`#t-tree li[data-task="${childId}"]`);
    expect(await page.textContent(`#t-tree li[data-task="${childId}"] .status`)).toBe('awaiting_permission');
    await page.click('#t-pending .pending button.approve');

    await page.waitForFunction(
      () => document.querySelector('#t-status')?.textContent === 'completed',
      undefined,
      {
        timeout: 20_000,
      },
    );
    expect((await waitForTask(sut, childId)).status).toBe('completed');
    await page.waitForFunction(
      (id) => document.querySelector(`#t-tree li[data-task="${id}"] .status`)?.textContent === 'completed',
      childId,
    );
    expect(await page.textContent(`#t-tree li[data-task="${childId}"] .agent`)).toBe('(coder)');
    expect(await page.getAttribute(`#t-tree li[data-task="${parentId}"]`, 'class')).toBe('current');

    // the link leads to the child's page, whose tree shows its parent (linked) and marks the child
    await page.click(`#t-tree li[data-task="${childId}"] > a`);
    await page.waitForFunction((id) => document.querySelector('#t-id')?.textContent === id, childId);
    await page.waitForSelector(`#t-tree li[data-task="${childId}"].current`);
    expect(await page.getAttribute(`#t-tree li[data-task="${parentId}"] > a`, 'href')).toBe(
      `#/tasks/${parentId}`,
    );
    expect(pageErrors).toEqual([]);
  });

  it("answered every request above, its own and the dashboard's, as the OpenAPI document describes it", async () => {
    expect(await sut.checkedMismatches()).toEqual([]);
  });
});
