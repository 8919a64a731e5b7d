import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RuntimeEvent } from '@runledger/contracts';
import {
  FakeOpenAiServer,
  readTaskLog,
  runCli,
  runThenStopModel,
  startFakeOpenAiServer,
  stderrProblems,
} from '@runledger/testing';

/**
 * RUNLEDGER_MODEL_API=responses against our local server speaking /v1/responses, as real child
 * processes: the stored conversation continued with previous_response_id round after round, a
 * refused id answered by the whole conversation, both recorded, and `runledger replay` offline.
 */

jest.setTimeout(60_000);

const read = (path: string) => ({
  id: `call_${path}`,
  name: 'file_read',
  arguments: JSON.stringify({ path }),
});
const continuations = (events: RuntimeEvent[]) =>
  events.flatMap((e) => (e.type === 'MODEL_RESPONDED' ? [e.payload.continuation] : []));

describe('the Responses API backend (real child processes)', () => {
  let dir: string;
  let env: Record<string, string>;
  let server: FakeOpenAiServer;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rl-responses-'));
    server = await startFakeOpenAiServer({ apiKey: 'test-key' });
    env = {
      RUNLEDGER_DB: join(dir, 'data', 'runledger.db'),
      RUNLEDGER_MODEL: 'openai',
      RUNLEDGER_MODEL_API: 'responses',
      OPENAI_BASE_URL: server.baseURL,
      OPENAI_API_KEY: 'test-key',
      RUNLEDGER_MODEL_ORCHESTRATOR: 'resp-model',
      RUNLEDGER_CRITIC: 'off',
    };
    writeFileSync(join(dir, 'notes.txt'), 'the build uses swc');
    writeFileSync(join(dir, 'todo.txt'), 'ship the fix');
  });
  afterEach(async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const replayMatches = async (taskId: string) => {
    const replay = await runCli(['replay', taskId], { cwd: dir, env });
    expect(stderrProblems(replay.stderr)).toEqual([]);
    expect(replay.stdout).toMatch(
      new RegExp(`replay matches the recording of ${taskId} \\(\\d+ events compared\\)`),
    );
    expect(replay.code).toBe(0);
  };

  it('each round continues the stored response with only its tool outputs; replay matches offline', async () => {
    server.enqueue(
      { tool_calls: [read('notes.txt')] },
      { tool_calls: [read('todo.txt'), { ...read('notes.txt'), id: 'call_again' }] },
      { content: 'Notes: swc. Todo: ship the fix.', chunks: ['Notes: swc. ', 'Todo: ship the fix.'] },
    );
    const taskId = await runThenStopModel('read my notes and todo', {
      cwd: dir,
      env,
      answer: 'Notes: swc. Todo: ship the fix.',
      stopModel: () => server.close(),
    });

    expect(server.requests.map((r) => r.path)).toEqual(['/v1/responses', '/v1/responses', '/v1/responses']);
    const [first, second, third] = server.requests;
    expect(first.body).toMatchObject({ model: 'resp-model', store: true, stream: true });
    expect(first.body.previous_response_id).toBeUndefined();
    expect((first.body.tools as { name: string }[]).map((t) => t.name)).toEqual(
      expect.arrayContaining(['file_read', 'runledger_plan', 'runledger_fail']),
    );
    const events = await readTaskLog(env.RUNLEDGER_DB, taskId);
    const records = continuations(events);
    expect(records.map((c) => [c?.stateless_reason, c?.previous_response_id])).toEqual([
      ['missing', null],
      [null, records[0]!.response_id],
      [null, records[1]!.response_id],
    ]);
    // only the outputs of the round's calls went out, the server held the rest
    expect(second.body.previous_response_id).toBe(records[0]!.response_id);
    expect(second.body.input).toEqual([
      { type: 'function_call_output', call_id: 'call_notes.txt', output: expect.stringContaining('swc') },
    ]);
    expect((third.body.input as { call_id: string }[]).map((i) => i.call_id)).toEqual([
      'call_todo.txt',
      'call_again',
    ]);
    expect(records.map((c) => c?.sent_items)).toEqual([1, 1, 2]);
    // the conversation the server answered is the one the runtime holds: user input, calls, outputs in order
    expect(
      (third.conversation as { type: string; call_id?: string }[]).map((i) => i.call_id ?? i.type),
    ).toEqual([
      'message',
      'call_notes.txt',
      'call_notes.txt',
      'call_todo.txt',
      'call_again',
      'call_todo.txt',
      'call_again',
    ]);
    expect(events.at(-1)).toMatchObject({ type: 'TASK_COMPLETED', payload: { stop_reason: 'completed' } });
    await replayMatches(taskId);
  });

  it('a previous_response_id the server no longer knows: the whole conversation goes out, the reason is recorded, the next round continues again', async () => {
    server.enqueue(
      { tool_calls: [read('notes.txt')], stored: false },
      { tool_calls: [read('todo.txt')] },
      { content: 'read both' },
    );
    const taskId = await runThenStopModel('read my notes and todo', {
      cwd: dir,
      env,
      answer: 'read both',
      stopModel: () => server.close(),
    });
    const events = await readTaskLog(env.RUNLEDGER_DB, taskId);
    const records = continuations(events);
    expect(records.map((c) => c?.stateless_reason)).toEqual(['missing', 'refused', null]);
    expect(records[1]!.detail).toMatch(/refused previous_response_id resp_\w+: .*not found/);
    expect(server.requests.map((r) => r.body.previous_response_id ?? null)).toEqual([
      null,
      records[0]!.response_id,
      null,
      records[1]!.response_id,
    ]);
    // the refused request was never answered: one MODEL_CALLED, one MODEL_RESPONDED per round
    expect(events.filter((e) => e.type === 'MODEL_CALLED')).toHaveLength(3);
    await replayMatches(taskId);
  });
});
