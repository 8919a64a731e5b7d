import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '@runledger/testing';
import { ApiHarness, bootApi, waitForTask } from './api-harness';

/**
 * Run discipline through the two front doors: `runledger run` with --budget
 * and --accept, and POST /tasks + GET /tasks/:id. Both show the stop reason,
 * rounds, tool calls, tokens and cost.
 */

const tool = (name: string, args: Record<string, unknown>) =>
  JSON.stringify({ type: 'tool', tool: name, args });
const respond = (content: string) => JSON.stringify({ type: 'respond', content });
const PRICES = JSON.stringify({ 'model-x': { input_per_mtok: 1000, output_per_mtok: 2000 } });
/** 100 prompt + 50 completion tokens per call at $1000/$2000 per million: $0.2 each */
const priced = (content: string) => ({
  content,
  model: 'model-x',
  usage: { prompt_tokens: 100, completion_tokens: 50 },
});

describe('runledger run: --budget and --accept', () => {
  let dir: string;
  let env: Record<string, string>;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'rl-discipline-cli-'));
    env = {
      RUNLEDGER_DB: join(dir, 'data', 'runledger.db'),
      RUNLEDGER_PRICE_TABLE: PRICES,
      RUNLEDGER_MEMORY: 'off',
    };
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const script = (orchestrator: unknown[]) => {
    const path = join(dir, 'script.json');
    writeFileSync(path, JSON.stringify({ orchestrator }));
    return `scripted:${path}`;
  };

  it('an accept check the log cannot prove: accept_check_failed, exit 1, usage with tokens and cost shown', async () => {
    const model = script([
      priced(tool('file_write', { path: 'a.txt', content: 'draft' })),
      priced(respond('report written')),
    ]);
    const accept = JSON.stringify({ id: 'report', kind: 'file_exists', target: 'report.txt' });
    const res = await runCli(['run', 'write the report', '--model', model, '--accept', accept, '--yes'], {
      cwd: dir,
      env,
    });
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('stop reason: accept_check_failed');
    expect(res.stderr).toMatch(/check report \(file_exists\)/);
    expect(res.stderr).toMatch(
      /rounds 2 · tool calls 1 · model calls 2 · tokens 300 \(prompt 200, completion 100\) · cost \$0\.4000/,
    );
  });

  it('--json: the summary carries stop reason, detail and usage; --budget max_tool_calls stops the run', async () => {
    const model = script(
      [1, 2, 3, 4].map((i) => priced(tool('file_write', { path: `f${i}.txt`, content: `${i}` }))),
    );
    const res = await runCli(
      [
        'run',
        'write files',
        '--model',
        model,
        '--budget',
        'max_tool_calls=2',
        '--budget',
        'max_rounds=3',
        '--json',
        '--yes',
      ],
      { cwd: dir, env },
    );
    expect(res.code).toBe(1);
    const summary = res.stdout
      .trim()
      .split('\n')
      .map(
        (l) =>
          JSON.parse(l) as {
            summary?: { stop_reason: string; detail: string; usage: Record<string, number> };
          },
      )
      .find((l) => l.summary)!.summary!;
    expect(summary.stop_reason).toBe('budget_exceeded');
    expect(summary.detail).toMatch(/all 2 tool calls used/);
    // the third tool call was refused before it ran
    expect(summary.usage).toMatchObject({ rounds: 3, tool_calls: 2, total_tokens: 450 });
    expect(summary.usage.cost_usd).toBeCloseTo(0.6, 9);
  });
});

describe('POST /tasks budgets and accept_checks; GET /tasks/:id shows the outcome', () => {
  let sut: ApiHarness;
  let scriptPath: string;
  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rl-discipline-api-'));
    scriptPath = join(dir, 'script.json');
    writeFileSync(
      scriptPath,
      JSON.stringify({
        orchestrator: [priced(tool('shell_exec', { command: 'echo built' })), priced(respond('built'))],
      }),
    );
    sut = await bootApi(
      {
        RUNLEDGER_MODEL: `scripted:${scriptPath}`,
        RUNLEDGER_PRICE_TABLE: PRICES,
        RUNLEDGER_MEMORY: 'off',
        RUNLEDGER_PERMISSION_RULES: JSON.stringify({ allow_programs: ['echo'] }),
      },
      { checkResponses: true },
    );
  });
  afterAll(async () => {
    await sut.close();
  });

  it('a command_success check passes from the recorded exit code; the view shows stop reason, rounds, tool calls, tokens, cost', async () => {
    const post = await sut.request('POST', '/tasks', {
      body: {
        input: 'build it',
        budgets: { max_rounds: 4 },
        accept_checks: [{ id: 'built', kind: 'command_success', target: 'echo built', match: 'built' }],
      },
    });
    expect(post.status).toBe(202);
    const view = await waitForTask(sut, post.body.task_id);
    expect(view).toMatchObject({
      status: 'completed',
      stop_reason: 'completed',
      stop_detail: 'the orchestrator responded',
      result: 'built',
    });
    expect(view.usage).toMatchObject({ rounds: 2, tool_calls: 1, model_calls: 2, total_tokens: 300 });
    expect(view.usage.cost_usd).toBeCloseTo(0.4, 9);
    const events = await sut.request('GET', `/tasks/${post.body.task_id}/events?limit=100`);
    const decided = (events.body.events as { type: string; payload: { passed: boolean } }[]).find(
      (e) => e.type === 'ACCEPTANCE_DECIDED',
    );
    expect(decided?.payload.passed).toBe(true);
  });

  it('budgets above the configured maximum are capped, not refused', async () => {
    const post = await sut.request('POST', '/tasks', {
      body: { input: 'x', budgets: { max_rounds: 100000 } },
    });
    expect(post.status).toBe(202);
    await waitForTask(sut, post.body.task_id);
  });

  it('answered every request above as the OpenAPI document describes it', () => {
    expect(sut.responseMismatches).toEqual([]);
  });
});
