/// <reference lib="dom" />
import { Browser } from 'playwright-core';
import { FakeOpenAiServer, startFakeOpenAiServer } from '@runledger/testing';
import { ApiHarness, TOKENS, bootApi, launchChromium, waitForTask } from './api-harness';

jest.setTimeout(60_000);

const REMOTE_INPUT = 'run echo remote-tree > remote-tree.txt';
const answered = (body: Record<string, unknown>): boolean =>
  (body.messages as { role: string }[]).some((m) => m.role === 'tool');

describe('dashboard: a remote agent as a child (e2e, headless Chromium, two services)', () => {
  let model: FakeOpenAiServer;
  let remote: ApiHarness;
  let sut: ApiHarness;
  let browser: Browser;

  beforeAll(async () => {
    model = await startFakeOpenAiServer({ apiKey: 'test-key' });
    model.setRoute((body) =>
      answered(body)
        ? { content: 'the remote agent wrote it' }
        : {
            tool_calls: [
              {
                id: 'd1',
                name: 'runledger_delegate',
                arguments: JSON.stringify({ agent: 'far', input: REMOTE_INPUT }),
              },
            ],
          },
    );
    remote = await bootApi({}, { checkResponses: true });
    process.env.RL_DASHBOARD_REMOTE_HEADERS = JSON.stringify({ authorization: `Bearer ${TOKENS.admin}` });
    sut = await bootApi(
      {
        RUNLEDGER_MODEL: 'openai',
        OPENAI_BASE_URL: model.baseURL,
        OPENAI_API_KEY: 'test-key',
        RUNLEDGER_MODEL_ORCHESTRATOR: 'tree-model',
        RUNLEDGER_CRITIC: 'off',
        RUNLEDGER_AGENTS: JSON.stringify([
          { name: 'far', a2a: { url: remote.url, headers_from: 'env:RL_DASHBOARD_REMOTE_HEADERS' } },
        ]),
      },
      { checkResponses: true },
    );
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await sut?.close();
    await remote?.close();
    await model?.close();
    delete process.env.RL_DASHBOARD_REMOTE_HEADERS;
  });

  it("shows the remote child with its agent, URL, remote id and state; its question is answered on the parent's page", async () => {
    const parentId: string = (await sut.request('POST', '/tasks', { body: { input: 'ask far' } })).body
      .task_id;
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

    // the remote task's question is the parent's own request
    await page.waitForSelector('#t-pending .pending button.approve', { timeout: 20_000 });
    expect(await page.getAttribute('#t-pending .pending', 'data-task')).toBe(parentId);
    await page.waitForSelector('#t-tree li.remote');
    const { children } = (await sut.request('GET', `/tasks/${parentId}/children`)).body;
    expect(children).toHaveLength(1);
    const child = children[0];
    expect(child).toMatchObject({
      agent: 'far',
      status: 'awaiting_permission',
      remote: { url: remote.url, state: 'input-required', remote_task_id: expect.any(String) },
    });
    const remoteTaskId: string = child.remote.remote_task_id;
    expect((await remote.request('GET', `/tasks/${remoteTaskId}`)).body.status).toBe('awaiting_permission');
    const li = `#t-tree li.remote[data-task="${child.task_id}"]`;
    expect(await page.textContent(`${li} .agent`)).toBe('(far, remote)');
    expect(await page.textContent(`${li} .status`)).toBe('awaiting_permission');
    expect(await page.textContent(`${li} .remote-url`)).toBe(remote.url);
    expect(await page.getAttribute(`${li} .remote-url`, 'href')).toBe(remote.url);
    expect(await page.textContent(`${li} .remote-where`)).toContain(`task ${remoteTaskId}`);

    await page.click('#t-pending .pending button.approve');
    await page.waitForFunction(
      () => document.querySelector('#t-status')?.textContent === 'completed',
      undefined,
      {
        timeout: 20_000,
      },
    );
    await page.waitForFunction(
      (sel) => document.querySelector(`${sel} .status`)?.textContent === 'completed',
      li,
    );
    expect((await waitForTask(remote, remoteTaskId)).status).toBe('completed');
    expect(pageErrors).toEqual([]);
  });

  it("answered every request above, its own and the dashboard's, as the OpenAPI document describes it", async () => {
    expect([...(await sut.checkedMismatches()), ...remote.responseMismatches]).toEqual([]);
  });
});
