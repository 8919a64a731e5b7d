import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  FakeOpenAiServer,
  runCli,
  readTaskLog,
  runThenStopModel,
  startFakeOpenAiServer,
  stderrProblems,
} from '@runledger/testing';

/**
 * Native tool calling (RUNLEDGER_MODEL_PROTOCOL=tools, the default) against our
 * local OpenAI-compatible server, streamed: tool-call deltas, parallel calls,
 * the tool turns sent back, and `runledger replay` of the run offline.
 */

jest.setTimeout(60_000);

const readStream = readTaskLog;

type Wire = { role: string; content?: string | null; tool_call_id?: string; tool_calls?: { id: string }[] };

describe('native tool calling through the openai backend (real child processes)', () => {
  let dir: string;
  let env: Record<string, string>;
  let server: FakeOpenAiServer;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rl-tools-openai-'));
    server = await startFakeOpenAiServer({ apiKey: 'test-key' });
    env = {
      RUNLEDGER_DB: join(dir, 'data', 'runledger.db'),
      RUNLEDGER_MODEL: 'openai',
      OPENAI_BASE_URL: server.baseURL,
      OPENAI_API_KEY: 'test-key',
      RUNLEDGER_MODEL_ORCHESTRATOR: 'tool-model',
      RUNLEDGER_MODEL_TOOL_CALLS: JSON.stringify({
        orchestrator: { tool_choice: 'auto', parallel_tool_calls: true },
      }),
      RUNLEDGER_CRITIC: 'off',
    };
    writeFileSync(join(dir, 'notes.txt'), 'the build uses swc');
    writeFileSync(join(dir, 'todo.txt'), 'ship the fix');
  });
  afterEach(async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('one tool call, then two parallel calls, then the answer: the tools run, the task completes, replay matches offline', async () => {
    server.enqueue(
      { tool_calls: [{ id: 'call_a', name: 'file_read', arguments: '{"path":"notes.txt"}' }] },
      {
        content: '',
        tool_calls: [
          { id: 'call_b', name: 'file_read', arguments: '{"path":"todo.txt"}' },
          { id: 'call_c', name: 'file_read', arguments: '{"path":"notes.txt"}' },
        ],
      },
      {
        content: 'Notes: swc. Todo: ship the fix \u{1F680}',
        chunks: ['Notes: swc. ', 'Todo: ship the fix \ud83d', '\ude80'],
      },
    );
    const taskId = await runThenStopModel('read my notes and todo', {
      cwd: dir,
      env,
      answer: 'Notes: swc. Todo: ship the fix \u{1F680}',
      stopModel: () => server.close(),
    });

    // What was sent: the tools (plus plan and fail) with the role's settings, and the tool turns in order.
    const chats = server.requests.filter((r) => r.path === '/v1/chat/completions');
    expect(chats).toHaveLength(3);
    const names = (chats[0].body.tools as { function: { name: string } }[]).map((t) => t.function.name);
    expect(names).toEqual(
      expect.arrayContaining(['file_read', 'shell_exec', 'runledger_plan', 'runledger_fail']),
    );
    expect(chats[0].body).toMatchObject({ stream: true, tool_choice: 'auto', parallel_tool_calls: true });
    const turns = (i: number) =>
      (chats[i].body.messages as Wire[])
        .slice(2)
        .map((m) =>
          m.role === 'tool'
            ? `tool:${m.tool_call_id}`
            : `${m.role}:${(m.tool_calls ?? []).map((c) => c.id).join(',')}`,
        );
    expect(turns(0)).toEqual([]);
    expect(turns(1)).toEqual(['assistant:call_a', 'tool:call_a']);
    expect(turns(2)).toEqual([
      'assistant:call_a',
      'tool:call_a',
      'assistant:call_b,call_c',
      'tool:call_b',
      'tool:call_c',
    ]);
    const toolMessages = (chats[2].body.messages as Wire[]).filter((m) => m.role === 'tool');
    expect(toolMessages.map((m) => m.content)).toEqual([
      expect.stringContaining('the build uses swc'),
      expect.stringContaining('ship the fix'),
      expect.stringContaining('the build uses swc'),
    ]);

    const events = await readStream(env.RUNLEDGER_DB, taskId);
    const responded = events.flatMap((e) => (e.type === 'MODEL_RESPONDED' ? [e.payload] : []));
    expect(responded.map((p) => p.tool_calls)).toEqual([
      [{ id: 'call_a', name: 'file_read', arguments: '{"path":"notes.txt"}' }],
      [
        { id: 'call_b', name: 'file_read', arguments: '{"path":"todo.txt"}' },
        { id: 'call_c', name: 'file_read', arguments: '{"path":"notes.txt"}' },
      ],
      [],
    ]);
    expect(responded.map((p) => [p.model, p.finish_reason])).toEqual([
      ['tool-model', 'tool_calls'],
      ['tool-model', 'tool_calls'],
      ['tool-model', 'stop'],
    ]);
    const decided = events.flatMap((e) => (e.type === 'ROUTER_DECIDED' ? [e.payload.directive] : []));
    expect(decided[0]).toEqual({ type: 'tool', tool: 'file_read', args: { path: 'notes.txt' } });
    expect(decided[1]).toMatchObject({
      type: 'plan',
      steps: [
        { id: 'call_b', kind: 'tool', tool: 'file_read', depends_on: [] },
        { id: 'call_c', kind: 'tool', tool: 'file_read', depends_on: [] },
      ],
    });
    expect(decided[2]).toEqual({ type: 'respond', content: 'Notes: swc. Todo: ship the fix \u{1F680}' });
    // Each parallel call was its own step with its own permission check and tool call.
    expect(events.filter((e) => e.type === 'TOOL_CALLED')).toHaveLength(3);
    expect(events.filter((e) => e.type === 'STEP_COMPLETED')).toHaveLength(2);
    // The emoji streamed as two halves of a surrogate pair lands in one chunk.
    const chunks = events.flatMap((e) => (e.type === 'OUTPUT_CHUNK' ? [e.payload.delta] : []));
    expect(chunks).toEqual(['Notes: swc. ', 'Todo: ship the fix ', '\u{1F680}']);
    expect(events.at(-1)).toMatchObject({ type: 'TASK_COMPLETED', payload: { stop_reason: 'completed' } });
    const called = events.flatMap((e) => (e.type === 'MODEL_CALLED' ? [e.payload.tool_turns ?? null] : []));
    expect(called).toEqual([null, { count: 1, malformed: 0 }, { count: 2, malformed: 0 }]);

    const replay = await runCli(['replay', taskId], { cwd: dir, env });
    expect(stderrProblems(replay.stderr)).toEqual([]);
    expect(replay.stdout).toMatch(
      new RegExp(`replay matches the recording of ${taskId} \\(\\d+ events compared\\)`),
    );
    expect(replay.code).toBe(0);
  });

  it('a coder step is offered the tools with its own tool_choice, runs its call under the step, and answers in text; replay matches', async () => {
    env.RUNLEDGER_MODEL_TOOL_CALLS = JSON.stringify({
      orchestrator: { tool_choice: 'auto' },
      coder: { tool_choice: 'required', parallel_tool_calls: false },
    });
    const plan = { steps: [{ id: 'code', kind: 'coder', args: { prompt: 'summarise notes.txt' } }] };
    server.enqueue(
      { tool_calls: [{ id: 'call_plan', name: 'runledger_plan', arguments: JSON.stringify(plan) }] },
      { tool_calls: [{ id: 'coder_read', name: 'file_read', arguments: '{"path":"notes.txt"}' }] },
      { content: 'the notes say: swc' },
      { content: 'Summary: the notes say: swc' },
    );
    const taskId = await runThenStopModel('summarise my notes', {
      cwd: dir,
      env,
      answer: 'Summary: the notes say: swc',
      stopModel: () => server.close(),
    });

    const chats = server.requests.filter((r) => r.path === '/v1/chat/completions');
    expect(chats).toHaveLength(4);
    const coderAsks = [chats[1], chats[2]];
    for (const ask of coderAsks) {
      expect(ask.body).toMatchObject({ tool_choice: 'required', parallel_tool_calls: false });
      const names = (ask.body.tools as { function: { name: string } }[]).map((t) => t.function.name);
      expect(names).toEqual(expect.arrayContaining(['file_read', 'runledger_fail']));
      expect(names).not.toContain('runledger_plan');
    }
    const sent = (chats[2].body.messages as Wire[]).slice(2);
    expect(sent.map((m) => m.role)).toEqual(['assistant', 'tool']);
    expect(sent[1]).toMatchObject({
      tool_call_id: 'coder_read',
      content: expect.stringContaining('the build uses swc'),
    });

    const events = await readStream(env.RUNLEDGER_DB, taskId);
    expect(
      events.flatMap((e) => (e.type === 'TOOL_CALLED' ? [[e.payload.call_id, e.payload.step_id]] : [])),
    ).toEqual([['call_1_code_t0_0', 'code']]);
    expect(events.find((e) => e.type === 'STEP_COMPLETED')).toMatchObject({
      payload: { step_id: 'code', output: 'the notes say: swc' },
    });

    const replay = await runCli(['replay', taskId], { cwd: dir, env });
    expect(stderrProblems(replay.stderr)).toEqual([]);
    expect(replay.stdout).toMatch(
      new RegExp(`replay matches the recording of ${taskId} \\(\\d+ events compared\\)`),
    );
    expect(replay.code).toBe(0);
  });

  it('arguments that are not JSON get one correction turn (a tool message with the error), then the call runs', async () => {
    server.enqueue(
      { tool_calls: [{ id: 'call_bad', name: 'file_read', arguments: '{"path": notes.txt' }] },
      { tool_calls: [{ id: 'call_good', name: 'file_read', arguments: '{"path":"notes.txt"}' }] },
      { content: 'swc' },
    );
    const out = await runCli(['run', 'read my notes', '--yes'], { cwd: dir, env });
    expect(stderrProblems(out.stderr)).toEqual([]);
    expect(out.code).toBe(0);
    const chats = server.requests.filter((r) => r.path === '/v1/chat/completions');
    const correction = (chats[1].body.messages as Wire[]).slice(2);
    expect(correction.map((m) => m.role)).toEqual(['assistant', 'tool']);
    expect(correction[1]).toMatchObject({
      tool_call_id: 'call_bad',
      content: expect.stringContaining('arguments are not valid JSON'),
    });
    const events = await readStream(env.RUNLEDGER_DB, /task (task_\w+) received/.exec(out.stderr)![1]);
    expect(
      events.flatMap((e) =>
        e.type === 'GUARD_TRIGGERED' && e.payload.guard === 'correction' ? [e.payload.detail] : [],
      ),
    ).toEqual([expect.stringContaining('file_read (call_bad): arguments are not valid JSON')]);
  });

  it('a reply with neither text nor a tool call gets the tools-protocol reminder (not the JSON one), then text answers', async () => {
    server.enqueue({ content: '' }, { content: 'all done' });
    const out = await runCli(['run', 'say done', '--yes'], { cwd: dir, env });
    expect(stderrProblems(out.stderr)).toEqual([]);
    expect(out.code).toBe(0);
    expect(out.stdout).toContain('all done');
    const chats = server.requests.filter((r) => r.path === '/v1/chat/completions');
    const asked = JSON.stringify(chats[1].body.messages);
    expect(asked).toContain('Your last reply had neither text nor a tool call');
    expect(asked).not.toContain('JSON ExecutionDirective');
  });

  it('arguments that fail the tool schema get a correction naming the problem', async () => {
    server.enqueue(
      { tool_calls: [{ id: 'c1', name: 'file_read', arguments: '{"file":"notes.txt"}' }] },
      { tool_calls: [{ id: 'c2', name: 'file_read', arguments: '{"path":"notes.txt"}' }] },
      { content: 'swc' },
    );
    const out = await runCli(['run', 'read my notes', '--yes'], { cwd: dir, env });
    expect(out.code).toBe(0);
    const chats = server.requests.filter((r) => r.path === '/v1/chat/completions');
    const answer = (chats[1].body.messages as Wire[]).find((m) => m.role === 'tool');
    expect(answer).toMatchObject({
      tool_call_id: 'c1',
      content: expect.stringContaining('invalid args for file_read'),
    });
  });

  it('an error inside the stream is classified by its code: invalid_api_key stops at once with authentication_error, no retry', async () => {
    server.enqueue({
      content: 'partial',
      stream_error: {
        message: 'Incorrect API key provided',
        code: 'invalid_api_key',
        type: 'invalid_request_error',
      },
    });
    const out = await runCli(['run', 'read my notes', '--yes'], {
      cwd: dir,
      env: { ...env, RUNLEDGER_MODEL_RETRIES: '2' },
    });
    expect(out.code).not.toBe(0);
    const taskId = /task (task_\w+) received/.exec(out.stderr)![1];
    const events = await readStream(env.RUNLEDGER_DB, taskId);
    const errors = events.flatMap((e) =>
      e.type === 'MODEL_RESPONDED' && e.payload.error ? [e.payload.error.kind] : [],
    );
    expect(errors).toEqual(['authentication_error']);
    expect(events.at(-1)).toMatchObject({
      type: 'TASK_FAILED',
      payload: { stop_reason: 'authentication_error' },
    });
  });

  it('an in-stream rate_limit_exceeded is rate_limited and retried; the retry answers', async () => {
    server.enqueue(
      {
        content: '',
        stream_error: { message: 'Rate limit reached', code: 'rate_limit_exceeded', type: 'requests' },
      },
      { content: 'done' },
    );
    const out = await runCli(['run', 'say done', '--yes'], {
      cwd: dir,
      env: { ...env, RUNLEDGER_MODEL_RETRIES: '2' },
    });
    expect(stderrProblems(out.stderr)).toEqual([]);
    expect(out.code).toBe(0);
    const events = await readStream(env.RUNLEDGER_DB, /task (task_\w+) received/.exec(out.stderr)![1]);
    expect(
      events.flatMap((e) => (e.type === 'MODEL_RESPONDED' ? [e.payload.error?.kind ?? 'ok'] : [])),
    ).toEqual(['rate_limited', 'ok']);
  });

  it('RUNLEDGER_MODEL=openai without an orchestrator model stops at start with a configuration error', async () => {
    const { RUNLEDGER_MODEL_ORCHESTRATOR: _named, ...unnamed } = env;
    const out = await runCli(['run', 'hello', '--yes'], { cwd: dir, env: unnamed });
    expect(out.code).not.toBe(0);
    expect(out.stderr).toContain(
      'RUNLEDGER_MODEL_ORCHESTRATOR: RUNLEDGER_MODEL is openai but no orchestrator model is named',
    );
    expect(server.requests).toHaveLength(0);
  });
});
