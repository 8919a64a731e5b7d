import { Role, ValidationError } from '@runledger/contracts';
import { InMemoryEventStore } from '@runledger/event-store';
import { DEFAULT_DISCIPLINE_SETTINGS } from '../discipline/settings';
import { taskReceivedPayload } from '../discipline/testing-events';
import { ChatMessage, ModelBackend, ModelRequest, ModelResponse, zeroUsage } from '../model/model-backend';
import { replayDivergence } from '../replay/replay-view';
import { replayTask } from '../runtime.module';
import { SESSION_HISTORY_MAX_TASKS, sessionTurnsOf } from './session-turns';
import { AllowAllPolicy, TestRuntime, startTestRuntime, testToolRegistry } from '../testing';
import { useTempStore } from '../testing/temp-store';

/** The task the prompt asks about: the text under its last "## Task" heading. */
const taskOf = (messages: readonly ChatMessage[]): string =>
  messages
    .filter((m) => m.role === 'user')
    .map((m) => m.content)
    .join('\n')
    .split('## Task\n')
    .pop()!;

/**
 * An orchestrator that answers every task with `answer to <task>` (padded when asked), and a
 * utility role that summarises into one fixed line; it keeps every request it got.
 */
class AnsweringBackend extends ModelBackend {
  readonly backend = 'answering';
  readonly requests: ModelRequest[] = [];
  constructor(
    private readonly padding = 0,
    private readonly utility = false,
  ) {
    super();
  }

  modelFor(role: Role): string | null {
    return role === 'orchestrator' || (this.utility && role === 'utility') ? 'answering-model' : null;
  }

  async complete(request: ModelRequest): Promise<ModelResponse> {
    this.requests.push(request);
    const content =
      request.role === 'utility'
        ? 'SUMMARY OF THE EARLIER TASKS'
        : JSON.stringify({
            type: 'respond',
            content: `answer to ${taskOf(request.messages)}${'.'.repeat(this.padding)}`,
          });
    return { content, usage: zeroUsage(), model: 'answering-model', finish_reason: 'stop' };
  }

  /** every orchestrator prompt of a task's input, as one text */
  promptsFor(input: string): string[] {
    return this.requests
      .filter((r) => r.role === 'orchestrator' && taskOf(r.messages) === input)
      .map((r) => r.messages.map((m) => m.content).join('\n'));
  }
}

describe('sessions: tasks with one session_id are a conversation', () => {
  let store: InMemoryEventStore;
  let rt: TestRuntime;
  const temp = useTempStore('rl-sessions-');

  const start = async (model: ModelBackend) => {
    store = new InMemoryEventStore();
    rt = await startTestRuntime({
      store,
      tools: testToolRegistry(temp.dir),
      permissions: new AllowAllPolicy(),
      model,
      discipline: DEFAULT_DISCIPLINE_SETTINGS,
    });
  };
  const run = async (input: string, session_id?: string) => {
    const { task_id } = await rt.runtime.submit(
      { input, ...(session_id ? { session_id } : {}) },
      { source: 'api' },
    );
    await rt.runtime.settled(task_id);
    return task_id;
  };
  afterEach(() => rt?.close());

  it("a later task's prompt holds the session's earlier inputs and answers; another session's does not", async () => {
    const model = new AnsweringBackend();
    await start(model);
    const first = await run('what is the capital of France?', 'sess_a');
    await run('and of Italy?', 'sess_a');
    await run('what did I ask before?', 'sess_b');

    const [second] = model.promptsFor('and of Italy?');
    expect(second).toContain(`Earlier task of this session (${first}):`);
    expect(second).toContain('asked: what is the capital of France?');
    expect(second).toContain('answer (completed): answer to what is the capital of France?');
    const [other] = model.promptsFor('what did I ask before?');
    expect(other).not.toContain('capital of France');
    expect(other).not.toContain('Earlier task of this session');
  });

  it('what the session held when the task was received is in its TASK_RECEIVED; the first task of a session records nothing', async () => {
    await start(new AnsweringBackend());
    const first = await run('one', 'sess_log');
    const second = await run('two', 'sess_log');
    const [received1] = await store.readStream(first, { limit: 1 });
    const [received2] = await store.readStream(second, { limit: 1 });
    expect(received1.payload).not.toHaveProperty('session_history');
    expect(received2.payload).toMatchObject({
      session_history: [{ task_id: first, input: 'one', answer: 'answer to one', stop_reason: 'completed' }],
    });
  });

  it('a replay reads the conversation from the log, not from the session as it is now', async () => {
    await start(new AnsweringBackend());
    await run('one', 'sess_replay');
    const second = await run('two', 'sess_replay');
    await run('three', 'sess_replay'); // the session moved on; the replay of `two` must not see it

    const recorded = await store.readWholeStream(second);
    const replay = await replayTask(
      {
        store,
        tools: testToolRegistry(temp.dir),
        logger: rt.logger,
        discipline: DEFAULT_DISCIPLINE_SETTINGS,
      },
      second,
    );
    expect(replayDivergence(recorded, replay.events)).toBeNull();
    expect(replay.events[0].payload).toMatchObject({ session_history: [{ input: 'one' }] });
  });

  it('over the window without a utility model: the oldest tasks are left out, and the prompt says how many', async () => {
    const model = new AnsweringBackend(6000);
    await start(model);
    for (const q of ['q1', 'q2', 'q3', 'q4', 'q5', 'q6']) await run(q, 'sess_long');
    const last = await run('q7', 'sess_long');

    const [prompt] = model.promptsFor('q7');
    expect(prompt).toMatch(/\[… \d earlier tasks of this session left out to fit the prompt …\]/);
    expect(prompt).not.toContain('asked: q1');
    expect(prompt).toContain('asked: q6');
    const built = (await store.readWholeStream(last)).find((e) => e.type === 'CONTEXT_BUILT')!;
    // the oldest task first; three or more left out are recorded as one run of ids
    expect(built.payload).toMatchObject({
      cut: expect.arrayContaining([expect.stringMatching(/^history:session_6(\.\.session_\d)?$/)]),
    });
    expect(built.payload.total_tokens).toBeLessThanOrEqual(built.payload.budget_tokens);
  });

  it('over the window with a utility model: the oldest tasks are summarised by it, the latest kept verbatim', async () => {
    const model = new AnsweringBackend(6000, true);
    await start(model);
    for (const q of ['q1', 'q2', 'q3', 'q4', 'q5', 'q6']) await run(q, 'sess_summary');
    const last = await run('q7', 'sess_summary');

    const [prompt] = model.promptsFor('q7');
    expect(prompt).toContain('Summary of earlier tasks of this session:');
    expect(prompt).toContain('SUMMARY OF THE EARLIER TASKS');
    expect(prompt).toContain('asked: q6');
    expect(prompt).not.toContain('asked: q1');
    const events = await store.readWholeStream(last);
    expect(events.find((e) => e.type === 'GUARD_TRIGGERED')?.payload).toMatchObject({ guard: 'compaction' });
    expect(events.find((e) => e.type === 'MODEL_CALLED')?.payload).toMatchObject({ role: 'utility' });
  });

  it('the session history is the latest ended tasks, each text at most 16000 characters', () => {
    const tasks = Array.from({ length: SESSION_HISTORY_MAX_TASKS + 5 }, (_, i) => ({
      task_id: `t${i}`,
      status: 'completed' as const,
      input: i === SESSION_HISTORY_MAX_TASKS + 4 ? 'x'.repeat(20_000) : `q${i}`,
      result: `a${i}`,
      stop_reason: 'completed' as const,
      usage: { total_tokens: 0, cost_usd: 0 },
    }));
    const running = {
      task_id: 'now',
      status: 'running' as const,
      input: 'q',
      result: null,
      stop_reason: null,
      usage: { total_tokens: 0, cost_usd: 0 },
    };
    const sut = sessionTurnsOf([...tasks, running]);
    expect(sut.map((t) => t.task_id)).toEqual(tasks.slice(5).map((t) => t.task_id));
    expect(sut[sut.length - 1].input.length).toBeLessThanOrEqual(16_000);
    expect(sut[sut.length - 1].input).toContain('bytes elided');
  });
});

describe('fork with another model', () => {
  let store: InMemoryEventStore;
  let rt: TestRuntime;
  const temp = useTempStore('rl-fork-model-');
  afterEach(() => rt?.close());
  const start = (model: ModelBackend) =>
    startTestRuntime({ store, tools: testToolRegistry(temp.dir), permissions: new AllowAllPolicy(), model });

  it('a fork may run on sys_util; a model the backend cannot serve is refused before anything is written', async () => {
    store = new InMemoryEventStore();
    const model = new AnsweringBackend();
    rt = await start(model);
    const { task_id } = await rt.runtime.submit({ input: 'run echo forked' }, { source: 'api' });
    await rt.runtime.settled(task_id);
    const asked = model.requests.length;

    const fork = await rt.runtime.fork(task_id, 1, { model: 'sys_util' });
    const p = await rt.runtime.settled(fork.task_id);
    expect(p.final).toMatchObject({ stop_reason: 'completed', result: 'shell_exec: forked' });
    expect(model.requests).toHaveLength(asked);
    const [received] = await store.readStream(fork.task_id, { limit: 1 });
    expect(received.payload).toMatchObject({ source: 'fork', model: 'sys_util' });
    const replay = await replayTask(
      { store, tools: testToolRegistry(temp.dir), logger: rt.logger },
      fork.task_id,
    );
    expect(replayDivergence(await store.readWholeStream(fork.task_id), replay.events)).toBeNull();

    const before = (await store.readAll({ after_position: 0, limit: 1000 })).length;
    await expect(rt.runtime.fork(task_id, 1, { model: 'gpt-4o' })).rejects.toThrow(ValidationError);
    await expect(rt.runtime.fork(task_id, 1, { model: 'gpt-4o' })).rejects.toThrow(
      /configured model backend \(answering\) serves no other model/,
    );
    expect((await store.readAll({ after_position: 0, limit: 1000 })).length).toBe(before);
  });
  it('a fork whose model this process cannot run ends with provider_error instead of running on another', async () => {
    store = new InMemoryEventStore();
    await store.append(
      'task_fork_elsewhere',
      [
        {
          type: 'TASK_RECEIVED',
          session_id: 'sess_fork',
          payload: taskReceivedPayload('run echo hi', {
            session_id: 'sess_fork',
            source: 'fork',
            forked_from: { task_id: 'task_gone', sequence: 1 },
            model: 'gpt-4o',
          }),
        },
      ],
      { expected: 'no_stream' },
    );
    const model = new AnsweringBackend();
    rt = await start(model);

    expect(await rt.runtime.resumeUnfinished()).toEqual(['task_fork_elsewhere']);
    const p = await rt.runtime.settled('task_fork_elsewhere');
    expect(p.final).toMatchObject({
      stop_reason: 'provider_error',
      detail: expect.stringContaining('"gpt-4o" cannot be run here'),
    });
    expect(model.requests).toEqual([]);
  });
});
