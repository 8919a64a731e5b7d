import { ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readTaskLog, runCli, runThenStopModel, stderrProblems } from '@runledger/testing';

/**
 * Native tool calling against an OpenAI-compatible mock server no one here
 * wrote (@dwmkerr/mock-llm, rules in its YAML file). Its rules only answer when
 * the request is in the tool-turn shape they expect (JMESPath on the body), so
 * a request shaped wrongly gets no answer and the task fails. mock-llm cannot
 * stream tool calls: RUNLEDGER_MODEL_STREAM=off.
 */

jest.setTimeout(60_000);

const MOCK_LLM = join(__dirname, '..', 'node_modules', '.bin', 'mock-llm');

const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });

const completion = (message: object, finish: string) =>
  JSON.stringify({
    id: 'chatcmpl-mock',
    object: 'chat.completion',
    created: 1,
    model: 'mock-tool-model',
    choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: finish }],
    usage: { prompt_tokens: 20, completion_tokens: 5, total_tokens: 25 },
  });
const call = (id: string, path: string) => ({
  id,
  type: 'function',
  function: { name: 'file_read', arguments: JSON.stringify({ path }) },
});

/** One rule per turn; each matches only the conversation it expects (the tool turns in order). */
const RULES = `
rules:
  - path: "/v1/chat/completions"
    method: "POST"
    sequence: 0
    match: "length(body.messages) == \`2\` && length(body.tools[?function.name == 'file_read']) == \`1\` && length(body.tools[?function.name == 'runledger_plan']) == \`1\`"
    response:
      status: 200
      content: '${completion({ content: null, tool_calls: [call('call_a', 'notes.txt')] }, 'tool_calls')}'
  - path: "/v1/chat/completions"
    method: "POST"
    sequence: 1
    match: "length(body.messages) == \`4\` && body.messages[2].tool_calls[0].id == 'call_a' && body.messages[3].role == 'tool' && body.messages[3].tool_call_id == 'call_a' && contains(body.messages[3].content, 'the build uses swc')"
    response:
      status: 200
      content: '${completion({ content: null, tool_calls: [call('call_b', 'todo.txt'), call('call_c', 'notes.txt')] }, 'tool_calls')}'
  - path: "/v1/chat/completions"
    method: "POST"
    sequence: 2
    match: "length(body.messages) == \`7\` && body.messages[5].tool_call_id == 'call_b' && body.messages[6].tool_call_id == 'call_c' && contains(body.messages[5].content, 'ship the fix')"
    response:
      status: 200
      content: '${completion({ content: 'Notes say swc; the todo is to ship the fix.' }, 'stop')}'
`;

const readStream = readTaskLog;

describe('native tool calling against @dwmkerr/mock-llm', () => {
  let dir: string;
  let mock: ChildProcess;
  let env: Record<string, string>;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rl-mock-llm-'));
    writeFileSync(join(dir, 'mock-llm.yaml'), RULES);
    writeFileSync(join(dir, 'notes.txt'), 'the build uses swc');
    writeFileSync(join(dir, 'todo.txt'), 'ship the fix');
    const port = await freePort();
    mock = spawn(MOCK_LLM, ['--config', join(dir, 'mock-llm.yaml')], {
      env: { ...process.env, PORT: String(port), HOST: '127.0.0.1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    await new Promise<void>((resolve, reject) => {
      let out = '';
      mock.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('server running')) resolve();
      });
      mock.on('exit', (code) => reject(new Error(`mock-llm exited (${code}): ${out}`)));
    });
    env = {
      RUNLEDGER_DB: join(dir, 'data', 'runledger.db'),
      RUNLEDGER_MODEL: 'openai',
      OPENAI_BASE_URL: `http://127.0.0.1:${port}/v1`,
      OPENAI_API_KEY: 'mock-key',
      RUNLEDGER_MODEL_ORCHESTRATOR: 'mock-tool-model',
      RUNLEDGER_MODEL_STREAM: 'off',
      RUNLEDGER_CRITIC: 'off',
    };
  });
  afterEach(async () => {
    if (mock.exitCode === null && mock.signalCode === null) {
      const exited = new Promise((r) => mock.once('exit', r));
      mock.kill();
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('one tool call, then two parallel calls, then the answer: completes, and replays offline to the same log', async () => {
    const taskId = await runThenStopModel('read my notes and todo', {
      cwd: dir,
      env,
      answer: 'Notes say swc; the todo is to ship the fix.',
      stopModel: () => {
        const exited = new Promise((r) => mock.once('exit', r));
        mock.kill();
        return exited;
      },
    });
    const events = await readStream(env.RUNLEDGER_DB, taskId);
    expect(
      events.flatMap((e) => (e.type === 'TOOL_CALLED' ? [(e.payload.args as { path: string }).path] : [])),
    ).toEqual(['notes.txt', 'todo.txt', 'notes.txt']);
    expect(
      events.flatMap((e) => (e.type === 'MODEL_RESPONDED' ? [e.payload.tool_calls?.length] : [])),
    ).toEqual([1, 2, 0]);
    expect(events.at(-1)).toMatchObject({ type: 'TASK_COMPLETED', payload: { stop_reason: 'completed' } });

    // The server is gone: the replay answers from the log alone.
    const replay = await runCli(['replay', taskId], { cwd: dir, env });
    expect(stderrProblems(replay.stderr)).toEqual([]);
    expect(replay.stdout).toMatch(new RegExp(`replay matches the recording of ${taskId}`));
    expect(replay.code).toBe(0);
  });
});
