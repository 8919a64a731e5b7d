import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeOpenAiServer, runCli, startFakeOpenAiServer, stderrProblems } from '@runledger/testing';
import { ApiHarness, TOKENS, bootApi, eventCount, openAiOrchestratorEnv, waitForTask } from './api-harness';

/**
 * A session's budget across its tasks over HTTP, against a local OpenAI-compatible server: set on the
 * session (PUT /sessions/:id/budget) or by the session's first task (budgets.session_max_tokens),
 * recorded on each task, shown by GET /sessions/:id, and enforced: a task received once the session
 * has spent its budget stops with budget_exceeded naming it, without asking the model.
 */
describe('session budget over HTTP', () => {
  let server: FakeOpenAiServer;
  let sut: ApiHarness;

  beforeEach(async () => {
    server = await startFakeOpenAiServer({ apiKey: 'test-key' });
    // every reply costs 3000 tokens
    server.setDefault({ content: 'done', usage: { prompt_tokens: 2500, completion_tokens: 500 } });
    sut = await bootApi(openAiOrchestratorEnv(server.baseURL), { checkResponses: true });
  });
  afterEach(async () => {
    await sut.close();
    await server.close();
  });

  const chats = () => server.requests.filter((r) => r.path === '/v1/chat/completions');
  const submit = async (body: Record<string, unknown>) => {
    const res = await sut.request('POST', '/tasks', { body });
    expect(res.status).toBe(202);
    return (await waitForTask(sut, res.body.task_id)) as {
      task_id: string;
      status: string;
      stop_reason: string;
      stop_detail: string;
    };
  };
  const receivedOf = async (taskId: string) =>
    (await sut.request('GET', `/tasks/${taskId}/events?limit=1`)).body.events[0].payload;

  it("a session's setting bounds its tasks; a task naming other limits is refused; the setting can be raised", async () => {
    const set = await sut.request('PUT', '/sessions/research/budget', { body: { max_tokens: 6000 } });
    expect(set.status).toBe(200);
    expect(set.body).toEqual({
      session_id: 'research',
      budget: {
        max_tokens: 6000,
        max_cost_usd: null,
        used_tokens: 0,
        used_cost_usd: 0,
        source: 'setting',
        set_by: null,
        tasks_counted: 0,
      },
    });
    // a session with a budget and no task yet exists
    const empty = await sut.request('GET', '/sessions/research', { token: TOKENS.reader });
    expect(empty.status).toBe(200);
    expect(empty.body).toMatchObject({ tasks: [], budget: { max_tokens: 6000 } });

    const t1 = await submit({ input: 'first question', session_id: 'research' });
    expect(await receivedOf(t1.task_id)).toMatchObject({
      session_budget: { max_tokens: 6000, used_tokens: 0, source: 'setting' },
    });
    const t2 = await submit({ input: 'second question', session_id: 'research' });
    expect(t2.status).toBe('completed');

    const before = await eventCount(sut);
    const refused = await sut.request('POST', '/tasks', {
      body: { input: 'more', session_id: 'research', budgets: { session_max_tokens: 100_000 } },
    });
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({
      error: 'validation_error',
      message: expect.stringContaining("the session's budget is already set"),
      details: { session_budget: { max_tokens: 6000, source: 'setting' } },
    });
    expect(await eventCount(sut)).toBe(before);

    // 6000 of 6000 spent: the next task stops before its first round
    const asked = chats().length;
    const t3 = await submit({ input: 'third question', session_id: 'research' });
    expect(t3).toMatchObject({ status: 'failed', stop_reason: 'budget_exceeded' });
    expect(t3.stop_detail).toContain(
      "the session used 6000 tokens (6000 in its earlier tasks, 0 in this one) of its session budget of 6000 (session_max_tokens, the session's setting)",
    );
    expect(chats()).toHaveLength(asked);
    const session = await sut.request('GET', '/sessions/research');
    expect(session.body.budget).toMatchObject({ max_tokens: 6000, used_tokens: 6000, tasks_counted: 3 });

    const raised = await sut.request('PUT', '/sessions/research/budget', {
      body: { max_tokens: 20_000, max_cost_usd: 5 },
    });
    expect(raised.body.budget).toMatchObject({ max_tokens: 20_000, max_cost_usd: 5, used_tokens: 6000 });
    const t4 = await submit({ input: 'fourth question', session_id: 'research' });
    expect(t4.status).toBe('completed');
    expect(sut.responseMismatches).toEqual([]);
  });

  it('the first task of a session sets it with budgets.session_max_tokens', async () => {
    const t1 = await submit({ input: 'first', session_id: 'notes', budgets: { session_max_tokens: 3000 } });
    expect(await receivedOf(t1.task_id)).toMatchObject({
      session_budget: { max_tokens: 3000, source: 'task', set_by: t1.task_id },
    });
    const t2 = await submit({ input: 'second', session_id: 'notes' });
    expect(t2).toMatchObject({ status: 'failed', stop_reason: 'budget_exceeded' });
    expect(t2.stop_detail).toContain(`(session_max_tokens, set by task ${t1.task_id})`);
  });

  it('a bad setting is refused with nothing written', async () => {
    const before = await eventCount(sut);
    for (const body of [{}, { max_tokens: 0 }, { max_tokens: 10, extra: 1 }, { max_cost_usd: -1 }]) {
      const res = await sut.request('PUT', '/sessions/research/budget', { body });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ error: 'validation_error', message: expect.any(String) });
    }
    const bad = await sut.request('PUT', `/sessions/${'x'.repeat(201)}/budget`, { body: { max_tokens: 10 } });
    expect(bad.status).toBe(400);
    const reader = await sut.request('PUT', '/sessions/research/budget', {
      token: TOKENS.reader,
      body: { max_tokens: 10 },
    });
    expect(reader.status).toBe(403);
    expect(await eventCount(sut)).toBe(before);
    expect((await sut.request('GET', '/sessions/research')).status).toBe(404);
    expect(sut.responseMismatches).toEqual([]);
  });
});

describe('runledger session-budget (child processes)', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'rl-session-budget-cli-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  // two CLI starts: seconds each on a quiet machine, far more on a loaded one
  it('sets the budget; a run naming other limits for the session is refused', async () => {
    const env = { RUNLEDGER_DB: join(dir, 'runledger.db'), RUNLEDGER_SANDBOX: 'process' };
    const set = await runCli(['session-budget', 'notes', '--max-tokens', '5000'], { cwd: dir, env });
    expect(stderrProblems(set.stderr)).toEqual([]);
    expect(set.code).toBe(0);
    expect(set.stdout.trim()).toBe(
      "session notes: 0 of 5000 tokens used (the session's setting; 0 task(s) counted)",
    );
    const run = await runCli(
      ['run', 'say hi', '--session', 'notes', '--budget', 'session_max_tokens=9', '--yes'],
      { cwd: dir, env },
    );
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("the session's budget is already set (session_max_tokens 5000");
  }, 90_000);
});
