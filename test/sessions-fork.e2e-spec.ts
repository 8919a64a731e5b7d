import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FakeOpenAiServer, startFakeOpenAiServer } from '@runledger/testing';
import { ApiHarness, TOKENS, bootApi, eventCount, openAiOrchestratorEnv, waitForTask } from './api-harness';

/**
 * Sessions as conversations and fork over the API, against a local OpenAI-compatible server:
 * what the model was sent is what these tests look at.
 */

type Wire = { role: string; content?: string | null };

describe('sessions and POST /tasks/:task_id/fork over HTTP', () => {
  let server: FakeOpenAiServer;
  let sut: ApiHarness;

  beforeEach(async () => {
    server = await startFakeOpenAiServer({ apiKey: 'test-key' });
    sut = await bootApi(openAiOrchestratorEnv(server.baseURL), { checkResponses: true });
  });
  afterEach(async () => {
    await sut.close();
    await server.close();
  });

  const chats = () => server.requests.filter((r) => r.path === '/v1/chat/completions');
  /** everything one chat request told the model, as one text */
  const sent = (i: number) => (chats()[i].body.messages as Wire[]).map((m) => m.content ?? '').join('\n');
  const submit = async (body: Record<string, unknown>) => {
    const res = await sut.request('POST', '/tasks', { body });
    expect(res.status).toBe(202);
    return (await waitForTask(sut, res.body.task_id)) as { task_id: string; status: string; result: string };
  };
  const eventsOf = async (taskId: string) =>
    (await sut.request('GET', `/tasks/${taskId}/events?limit=1000`)).body.events as {
      sequence: number;
      type: string;
      payload: Record<string, unknown>;
    }[];

  it("the second task of a session is sent the first task's input and answer; a task of another session is not", async () => {
    server.enqueue({ content: 'Paris is the capital of France.' });
    const first = await submit({ input: 'What is the capital of France?', session_id: 'trip-planning' });
    expect(first).toMatchObject({ status: 'completed', result: 'Paris is the capital of France.' });

    server.enqueue({ content: 'Rome.' });
    const second = await submit({ input: 'And of Italy?', session_id: 'trip-planning' });
    expect(second.status).toBe('completed');
    expect(chats()).toHaveLength(2);
    expect(sent(1)).toContain('What is the capital of France?');
    expect(sent(1)).toContain('Paris is the capital of France.');
    expect(sent(1)).toContain('And of Italy?');

    server.enqueue({ content: 'You have not asked anything yet.' });
    await submit({ input: 'What did I ask before?', session_id: 'another-session' });
    expect(sent(2)).not.toContain('France');
    expect(sent(2)).not.toContain('Earlier task of this session');

    // the log says what the task was shown, so a replay needs no other task
    const [received] = await eventsOf(second.task_id);
    expect(received.payload.session_history).toEqual([
      {
        task_id: first.task_id,
        input: 'What is the capital of France?',
        answer: 'Paris is the capital of France.',
        stop_reason: 'completed',
      },
    ]);

    const session = await sut.request('GET', '/sessions/trip-planning', { token: TOKENS.reader });
    expect(session.status).toBe(200);
    expect(session.body).toEqual({
      session_id: 'trip-planning',
      on_busy: null,
      tasks: [
        expect.objectContaining({
          task_id: second.task_id,
          status: 'completed',
          input_first_line: 'And of Italy?',
          stop_reason: 'completed',
        }),
        expect.objectContaining({
          task_id: first.task_id,
          input_first_line: 'What is the capital of France?',
        }),
      ],
      next_cursor: null,
      budget: null,
    });
    expect(session.body.tasks[0]).toEqual({
      task_id: second.task_id,
      status: 'completed',
      input_first_line: 'And of Italy?',
      stop_reason: 'completed',
      created_at: expect.any(String),
      updated_at: expect.any(String),
      duration_ms: expect.any(Number),
    });
    const page = await sut.request('GET', '/sessions/trip-planning?limit=1');
    expect(page.body.tasks.map((t: { task_id: string }) => t.task_id)).toEqual([second.task_id]);
    const next = await sut.request('GET', `/sessions/trip-planning?limit=1&cursor=${page.body.next_cursor}`);
    expect(next.body.tasks.map((t: { task_id: string }) => t.task_id)).toEqual([first.task_id]);
  });

  it('GET /sessions/:session_id: 404 for a session no task has, 400 for a bad query, 403 without tasks:read', async () => {
    const unknown = await sut.request('GET', '/sessions/nobody-here');
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({
      error: 'not_found',
      message: expect.stringContaining('nobody-here'),
    });
    const bad = await sut.request('GET', '/sessions/s1?limit=0');
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: 'validation_error', details: expect.anything() });
    expect((await sut.request('GET', '/sessions/s1?color=red')).status).toBe(400);
    expect((await sut.request('GET', '/sessions/s1', { token: TOKENS.approver })).status).toBe(403);
    expect((await sut.request('GET', '/sessions/s1', { token: null })).status).toBe(401);
  });

  it('a fork of a finished task reuses its recorded outputs up to the event (model not asked, tool not run again), then runs', async () => {
    writeFileSync(join(sut.workspace, 'notes.txt'), 'the build uses swc');
    server.enqueue(
      { tool_calls: [{ id: 'call_a', name: 'file_read', arguments: '{"path":"notes.txt"}' }] },
      { content: 'The build uses swc.' },
    );
    const source = await submit({ input: 'what does the build use?' });
    expect(source).toMatchObject({ status: 'completed', result: 'The build uses swc.' });
    const sourceEvents = await eventsOf(source.task_id);
    const atTool = sourceEvents.find((e) => e.type === 'TOOL_COMPLETED')!.sequence;
    const asked = chats().length;

    server.enqueue({ content: 'swc, says notes.txt' });
    const res = await sut.request('POST', `/tasks/${source.task_id}/fork`, {
      token: TOKENS.writer,
      body: { at_sequence: atTool },
    });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({
      task_id: expect.stringMatching(/^task_/),
      session_id: expect.any(String),
    });
    expect(res.body.task_id).not.toBe(source.task_id);
    const fork = await waitForTask(sut, res.body.task_id);
    expect(fork).toMatchObject({ status: 'completed', result: 'swc, says notes.txt' });

    // one new model call: the one after the copied tool outcome; the tool call before it was not made again
    expect(chats()).toHaveLength(asked + 1);
    expect(sent(asked)).toContain('the build uses swc');
    const forkEvents = await eventsOf(fork.task_id);
    expect(forkEvents[0].payload).toMatchObject({
      source: 'fork',
      forked_from: { task_id: source.task_id, sequence: atTool },
    });
    expect(forkEvents.slice(1, atTool).map((e) => e.type)).toEqual(
      sourceEvents.slice(1, atTool).map((e) => e.type),
    );
    expect(forkEvents.filter((e) => e.type === 'TOOL_CALLED')).toHaveLength(1);
    expect(forkEvents.filter((e) => e.type === 'MODEL_RESPONDED')).toHaveLength(2);
    // the source is as it was
    expect(await eventsOf(source.task_id)).toHaveLength(sourceEvents.length);
  });

  it('a fork from the first event runs the task again from its start, with the model it names', async () => {
    server.enqueue({ content: 'first answer' });
    const source = await submit({ input: 'say something' });
    const asked = chats().length;

    server.enqueue({ content: 'second answer' });
    const res = await sut.request('POST', `/tasks/${source.task_id}/fork`, {
      body: { at_sequence: 1, model: 'model-b' },
    });
    expect(res.status).toBe(202);
    expect(await waitForTask(sut, res.body.task_id)).toMatchObject({
      status: 'completed',
      result: 'second answer',
    });
    expect(chats()).toHaveLength(asked + 1);
    expect(chats()[asked].body.model).toBe('model-b');
    expect(chats()[0].body.model).toBe('model-a');
  });

  it('POST /tasks/:task_id/fork refuses bad input with a 4xx and writes nothing', async () => {
    server.enqueue({ content: 'done' });
    const source = await submit({ input: 'say something' });
    const last = (await eventsOf(source.task_id)).length;
    const before = await eventCount(sut);
    const fork = (body: unknown, token: string | null = TOKENS.writer) =>
      sut.request('POST', `/tasks/${source.task_id}/fork`, { token, body });

    for (const at_sequence of [0, -1, 1.5, '2', null]) {
      const res = await fork({ at_sequence });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ error: 'validation_error', details: expect.anything() });
    }
    expect((await fork({})).status).toBe(400);
    expect((await fork({ at_sequence: 1, extra: true })).status).toBe(400);
    const past = await fork({ at_sequence: last + 1 });
    expect(past.status).toBe(400);
    expect(past.body).toMatchObject({
      error: 'validation_error',
      message: `sequence must be between 1 and ${last}`,
      details: { field: 'at_sequence', last_sequence: last },
    });
    const unknown = await sut.request('POST', '/tasks/task_nope/fork', { body: { at_sequence: 1 } });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ error: 'not_found' });
    expect((await fork({ at_sequence: 1 }, TOKENS.reader)).status).toBe(403);
    expect((await fork({ at_sequence: 1 }, null)).status).toBe(401);
    expect((await fork({ at_sequence: 1, model: 'has space' })).status).toBe(400);
    expect(await eventCount(sut)).toBe(before);
  });

  it('answered every request above as the OpenAPI document describes it', () => {
    expect(sut.responseMismatches).toEqual([]);
  });
});

describe('POST /tasks/:task_id/fork on a server without a model', () => {
  let sut: ApiHarness;
  beforeAll(async () => {
    sut = await bootApi({ RUNLEDGER_MEMORY: 'off' });
  });
  afterAll(() => sut.close());

  it('names sys_util or nothing: another model is refused (400), since no server could run it', async () => {
    const res = await sut.request('POST', '/tasks', { body: { input: 'run echo hello' } });
    await waitForTask(sut, res.body.task_id);
    const refused = await sut.request('POST', `/tasks/${res.body.task_id}/fork`, {
      body: { at_sequence: 1, model: 'gpt-4o' },
    });
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({
      error: 'validation_error',
      message: expect.stringContaining('serves no other model'),
      details: { field: 'model' },
    });
    const forked = await sut.request('POST', `/tasks/${res.body.task_id}/fork`, {
      body: { at_sequence: 1, model: 'sys_util' },
    });
    expect(forked.status).toBe(202);
    expect(await waitForTask(sut, forked.body.task_id)).toMatchObject({ status: 'completed' });
  });
});
