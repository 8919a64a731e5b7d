/// <reference lib="dom" />
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Browser } from 'playwright-core';
import { RuntimeEvent } from '@runledger/contracts';
import { McpClientManager } from '@runledger/tools';
import { ApiHarness, TOKENS, bootApi, launchChromium, waitForTask } from './api-harness';
import { untilListed } from './support/mcp';

const SERVER = resolve(__dirname, '..', 'node_modules', '.bin', 'mcp-server-everything');
const ELICITING_TOOL = 'mcp__everything__trigger-elicitation-request';

describe("the dashboard answers an MCP server's form (e2e)", () => {
  let sut: ApiHarness;
  let browser: Browser;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rl-mcp-dashboard-'));
    writeFileSync(
      join(dir, 'script.json'),
      JSON.stringify({
        orchestrator: [
          JSON.stringify({ type: 'tool', tool: ELICITING_TOOL, args: {} }),
          JSON.stringify({ type: 'respond', content: 'form answered' }),
        ],
      }),
    );
    sut = await bootApi(
      {
        RUNLEDGER_MODEL: `scripted:${join(dir, 'script.json')}`,
        RUNLEDGER_MEMORY: 'off',
        RUNLEDGER_MCP_SERVERS: JSON.stringify([{ name: 'everything', command: SERVER }]),
        RUNLEDGER_PERMISSION_RULES: JSON.stringify({ mcp_allow: ['everything'] }),
      },
      { checkResponses: true },
    );
    browser = await launchChromium();
    await untilListed(sut.app.get(McpClientManager), ELICITING_TOOL);
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await sut?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('shows the form with its defaults; Send returns the fields to the server', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    await page.goto(`${sut.url}/admin#token=${encodeURIComponent(TOKENS.admin)}`);
    await page.waitForSelector('#view-tasks:not([hidden])');
    await page.fill('#submit-input', 'fill in the form');
    await page.click('#submit-button');
    await page.waitForSelector('#t-pending button.send-form', { timeout: 20_000 });
    expect(await page.textContent('#t-pending .form-message')).toBe(
      'Please provide inputs for the following fields:',
    );
    expect(await page.inputValue('#t-pending input[name=firstLine]')).toBe('It was a dark and stormy night.');
    await page.fill('#t-pending input[name=name]', 'Grace Hopper');
    await page.check('#t-pending input[name=check]');
    await page.click('#t-pending button.send-form');
    // a refused answer would be flashed and leave the form in place
    await page
      .waitForSelector('#t-pending button.send-form', { state: 'detached', timeout: 20_000 })
      .catch(async () => {
        throw new Error(`the form stayed: ${await page.textContent('#flash')}`);
      });
    const taskId = (await page.textContent('#t-id'))!.trim();
    expect(await waitForTask(sut, taskId, undefined, 20_000)).toMatchObject({ status: 'completed' });
    const events = (await sut.request('GET', `/tasks/${taskId}/events?limit=1000`)).body
      .events as RuntimeEvent[];
    const resolved = events.find((e) => e.type === 'PERMISSION_RESOLVED');
    expect(resolved?.payload).toMatchObject({
      decision: 'allow_once',
      content: {
        name: 'Grace Hopper',
        check: true,
        firstLine: 'It was a dark and stormy night.',
        integer: 42,
      },
    });
    const completed = events.find((e) => e.type === 'TOOL_COMPLETED');
    expect(JSON.stringify(completed?.payload)).toContain('Grace Hopper');
    expect(sut.responseMismatches).toEqual([]);
  }, 60_000);
});
