import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Budgets, EventPayload, RuntimeEvent, ValidationError } from '@runledger/contracts';
import { SqliteEventStore } from '@runledger/event-store';
import { FakeOpenAiServer, FakeReply, startFakeOpenAiServer } from '@runledger/testing';
import { OpenAiBackend } from '../model/openai-backend';
import { replayTask } from '../runtime.module';
import { replayView } from '../replay/replay-view';
import { AllowAllPolicy, RecordingRuntimeLogger, startTestRuntime, testToolRegistry } from '../testing';
import { SqliteWithMemory, openSqliteWithMemory } from '../testing/sqlite-memory';
import { DEFAULT_DISCIPLINE_SETTINGS } from './settings';

/**
 * A session's token budget across its tasks, on a real SQLite log and a local OpenAI-compatible
 * server over HTTP: each task records the session's limit and spend when it is received; near the
 * limit the session's earlier tasks give way in the prompt first (summarised by the utility model,
 * or left out without one); past it a task stops with budget_exceeded naming the session budget.
 * Each task replays offline from its own record, whatever the session holds by then.
 */
describe('session token budget (SQLite log, OpenAI-compatible server)', () => {
  let dir: string;
  let opened: SqliteWithMemory;
  let store: SqliteEventStore;
  let server: FakeOpenAiServer;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rl-session-budget-'));
    opened = await openSqliteWithMemory(dir);
    ({ store } = opened);
    server = await startFakeOpenAiServer();
  });
  afterEach(async () => {
    await server.close();
    await opened.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const SESSION = 'sess_budgeted';
  /** every orchestrator reply costs 3000 tokens; a summary 600 */
  const answer = (content: string): FakeReply => ({
    content,
    usage: { prompt_tokens: 2500, completion_tokens: 500 },
  });
  const summary: FakeReply = {
    content: 'The user asked about colours and fruit.',
    usage: { prompt_tokens: 400, completion_tokens: 200 },
  };
  const refused: FakeReply = { status: 400, message: 'the model u does not exist' };
  const chats = () => server.requests.filter((r) => r.path === '/v1/chat/completions');
  const orchestratorChats = () => chats().filter((r) => r.body.model === 'm');
  const promptOf = (body: Record<string, unknown>) =>
    (body.messages as Array<{ content: string | null }>).map((m) => m.content ?? '').join('\n');

  /** `summaries`: the utility model summarises; otherwise the server refuses it */
  async function session(summaries: boolean) {
    server.setRoute((body) => (body.model === 'u' ? (summaries ? summary : refused) : undefined));
    const rt = await startTestRuntime({
      store,
      tools: testToolRegistry(dir),
      permissions: new AllowAllPolicy(),
      model: new OpenAiBackend({
        baseURL: server.baseURL,
        apiKey: 'k',
        models: { orchestrator: 'm', utility: 'u' },
        stream: false,
      }),
      discipline: DEFAULT_DISCIPLINE_SETTINGS,
    });
    const run = async (input: string, budgets?: Budgets) => {
      const { task_id } = await rt.runtime.submit(
        { input, session_id: SESSION, ...(budgets ? { budgets } : {}) },
        { source: 'api' },
      );
      const progress = await rt.runtime.settled(task_id);
      return { task_id, progress, events: await store.readWholeStream(task_id) };
    };
    return { rt, run };
  }
  const payloads = <T extends RuntimeEvent['type']>(events: RuntimeEvent[], type: T) =>
    events.flatMap((e) => (e.type === type ? [e.payload as EventPayload<T>] : []));
  const received = (events: RuntimeEvent[]) => payloads(events, 'TASK_RECEIVED')[0];
  const replayMatches = async (taskId: string) => {
    const { events } = await replayTask(
      {
        store,
        tools: testToolRegistry(dir),
        discipline: DEFAULT_DISCIPLINE_SETTINGS,
        logger: new RecordingRuntimeLogger(),
      },
      taskId,
    );
    expect(replayView(events)).toEqual(replayView(await store.readWholeStream(taskId)));
  };

  it('recorded per task; near the limit the earlier tasks are summarised first; past it the next task stops naming the session budget; each replays', async () => {
    const { rt, run } = await session(true);
    try {
      server.enqueue(answer('red'), answer('apple'), answer('blue'), answer('pear'));
      const t1 = await run('my favourite colour?', { session_max_tokens: 10_000 });
      expect(received(t1.events).session_budget).toEqual({
        max_tokens: 10_000,
        max_cost_usd: null,
        used_tokens: 0,
        used_cost_usd: 0,
        source: 'task',
        set_by: t1.task_id,
        tasks_counted: 0,
      });
      const t2 = await run('my favourite fruit?');
      const t3 = await run('and the sky?');
      // later tasks inherit the limit and carry what the session had spent when they came
      expect(received(t2.events).session_budget).toMatchObject({ used_tokens: 3000, set_by: t1.task_id });
      expect(received(t3.events).session_budget).toMatchObject({ used_tokens: 6000, tasks_counted: 2 });
      const built3 = payloads(t3.events, 'CONTEXT_BUILT')[0];
      expect(built3.session_budget).toEqual({ used_tokens: 6000, used_cost_usd: 0, near: false });
      expect(promptOf(chats()[2].body)).toContain(`Earlier task of this session (${t1.task_id})`);
      expect(chats()).toHaveLength(3);

      // 1000 of 10000 left: the earlier tasks are summarised by the utility model before the round
      const t4 = await run('a fruit of that colour?');
      expect(received(t4.events).session_budget).toMatchObject({ used_tokens: 9000, tasks_counted: 3 });
      const compaction = payloads(t4.events, 'GUARD_TRIGGERED').filter((g) => g.guard === 'compaction');
      expect(compaction).toHaveLength(1);
      expect(compaction[0].detail).toMatch(
        /near the session budget: the session's earlier tasks \(rounds -3, -2, -1\) summarised/,
      );
      expect(compaction[0].data).toMatchObject({ reason: 'session_budget', rounds: [-3, -2, -1] });
      const built4 = payloads(t4.events, 'CONTEXT_BUILT')[0];
      expect(built4.session_budget).toEqual({ used_tokens: 9600, used_cost_usd: 0, near: true });
      expect(built4.compacted).toBe(true);
      const asked = chats()
        .slice(3)
        .map((r) => r.body);
      expect(asked.map((b) => b.model)).toEqual(['u', 'm']);
      expect(promptOf(asked[1])).toContain('Summary of earlier tasks of this session:');
      expect(promptOf(asked[1])).toContain('The user asked about colours and fruit.');
      expect(promptOf(asked[1])).not.toContain('Earlier task of this session (');
      expect(t4.progress.final?.stop_reason).toBe('completed');

      // 12600 spent of 10000: the next task starts no round and asks the server nothing
      const before = chats().length;
      const t5 = await run('one more?');
      expect(received(t5.events).session_budget).toMatchObject({ used_tokens: 12_600, tasks_counted: 4 });
      expect(t5.progress.final?.stop_reason).toBe('budget_exceeded');
      expect(payloads(t5.events, 'TASK_FAILED')[0].detail).toContain(
        `the session used 12600 tokens (12600 in its earlier tasks, 0 in this one) of its session budget of 10000 (session_max_tokens, set by task ${t1.task_id})`,
      );
      expect(chats()).toHaveLength(before);
    } finally {
      await rt.close();
    }
    // offline, from each task's own record: the server is not asked again
    const requests = server.requests.length;
    const tasks = await store.readAll({ types: ['TASK_RECEIVED'] });
    expect(tasks).toHaveLength(5);
    for (const e of tasks) await replayMatches(e.task_id);
    expect(server.requests).toHaveLength(requests);
  });

  it('when the utility model cannot summarise, the earlier tasks are left out near the limit; a reply that crosses it stops the task before its tools', async () => {
    const { rt, run } = await session(false);
    try {
      server.enqueue(answer('red'), answer('apple'));
      const t1 = await run('my favourite colour?', { session_max_tokens: 7400 });
      await run('my favourite fruit?');
      // 1400 of 7400 left: the summary is refused, so the prompt leaves both earlier tasks out and says so
      server.enqueue({
        tool_calls: [{ id: 'c1', name: 'echo', arguments: '{"text":"hi"}' }],
        usage: { prompt_tokens: 1500, completion_tokens: 500 },
      });
      const t3 = await run('echo hi');
      const built = payloads(t3.events, 'CONTEXT_BUILT')[0];
      expect(built.session_budget).toEqual({ used_tokens: 6000, used_cost_usd: 0, near: true });
      expect(built.cut).toEqual(expect.arrayContaining(['history:session_2', 'history:session_1']));
      const prompt = promptOf(orchestratorChats()[2].body);
      expect(prompt).toContain('[… 2 earlier tasks of this session left out to fit the prompt …]');
      expect(prompt).not.toContain(t1.task_id);
      // the reply spent 2000 more: 8000 of 7400, so the tool it asked for never runs
      expect(t3.progress.final?.stop_reason).toBe('budget_exceeded');
      expect(payloads(t3.events, 'TASK_FAILED')[0].detail).toContain(
        'the session used 8000 tokens (6000 in its earlier tasks, 2000 in this one) of its session budget of 7400 (session_max_tokens',
      );
      expect(payloads(t3.events, 'TOOL_CALLED')).toEqual([]);
      await replayMatches(t3.task_id);
    } finally {
      await rt.close();
    }
  });

  it('a task queued behind a running one of its session takes the budget again when its turn begins, with what that one spent', async () => {
    const { rt } = await session(true);
    let queued = '';
    try {
      server.enqueue({ ...answer('slow'), delay_ms: 400 }, answer('next'));
      const first = await rt.runtime.submit(
        { input: 'a slow question', session_id: SESSION, budgets: { session_max_tokens: 10_000 } },
        { source: 'api' },
      );
      const second = await rt.runtime.submit({ input: 'and then?', session_id: SESSION }, { source: 'api' });
      await rt.runtime.settled(first.task_id);
      // a queued task runs once its turn begins: waited for until it ends
      for (let i = 0; !(await rt.runtime.progress(second.task_id)).final; i++) {
        if (i > 200) throw new Error('the queued task did not end');
        await new Promise((r) => setTimeout(r, 25));
      }
      queued = second.task_id;
      const events = await store.readWholeStream(second.task_id);
      expect(received(events)).toMatchObject({
        queued_behind: first.task_id,
        session_budget: { used_tokens: 0, set_by: first.task_id },
      });
      expect(payloads(events, 'SESSION_TURN_BEGAN')[0].session_budget).toMatchObject({
        max_tokens: 10_000,
        used_tokens: 3000,
        tasks_counted: 1,
        set_by: first.task_id,
      });
      expect(payloads(events, 'CONTEXT_BUILT')[0].session_budget).toMatchObject({ used_tokens: 3000 });
    } finally {
      await rt.close();
    }
    // the replay is received queued the same and its turn begins with the budget the recording's began with
    const { events: replayed } = await replayTask(
      {
        store,
        tools: testToolRegistry(dir),
        discipline: DEFAULT_DISCIPLINE_SETTINGS,
        logger: new RecordingRuntimeLogger(),
      },
      queued,
    );
    expect(payloads(replayed, 'SESSION_TURN_BEGAN')[0].session_budget).toMatchObject({ used_tokens: 3000 });
    expect(replayView(replayed)).toEqual(replayView(await store.readWholeStream(queued)));
  });

  it('a later task naming other session limits is refused and nothing is written; the same limits are accepted', async () => {
    const { rt, run } = await session(false);
    try {
      server.enqueue(answer('red'), answer('blue'));
      const t1 = await run('my favourite colour?', { session_max_tokens: 50_000 });
      const written = (await store.readAll()).length;
      await expect(
        rt.runtime.submit(
          { input: 'more room?', session_id: SESSION, budgets: { session_max_tokens: 90_000 } },
          { source: 'api' },
        ),
      ).rejects.toThrow(ValidationError);
      await expect(
        rt.runtime.submit(
          { input: 'a cost cap?', session_id: SESSION, budgets: { session_max_cost_usd: 1 } },
          { source: 'api' },
        ),
      ).rejects.toThrow(/session's budget is already set \(session_max_tokens 50000.*by task/);
      expect(await store.readAll()).toHaveLength(written);
      const t2 = await run('again?', { session_max_tokens: 50_000, max_tokens: 4000 });
      expect(received(t2.events).session_budget).toMatchObject({
        max_tokens: 50_000,
        set_by: t1.task_id,
        used_tokens: 3000,
      });
      // another session is not this one's
      const other = await rt.runtime.submit(
        { input: 'elsewhere', session_id: 'sess_other' },
        { source: 'api' },
      );
      expect(received(await store.readWholeStream(other.task_id)).session_budget).toBeUndefined();
      await rt.runtime.settled(other.task_id);
    } finally {
      await rt.close();
    }
  });
});
