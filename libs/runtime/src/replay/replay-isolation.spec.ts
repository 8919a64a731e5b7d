import { RuntimeEvent, TaskUsage } from '@runledger/contracts';
import { DEFAULT_DISCIPLINE_SETTINGS, DisciplineSettings } from '../discipline/settings';
import { ModelBackend } from '../model/model-backend';
import { ScriptItem, ScriptedBackend } from '../model/scripted-backend';
import { replayDivergence, replayView } from './replay-view';
import { replayTask } from '../runtime.module';
import { DEADLINE_PASSED } from '../loop/runtime-loop';
import { RecordingRuntimeLogger, RuleTablePolicy, startTestRuntime, testToolRegistry } from '../testing';
import { useTempStore } from '../testing/temp-store';
import { ToolRegistry } from '@runledger/tools';

const tool = (name: string, args: Record<string, unknown>) =>
  JSON.stringify({ type: 'tool', tool: name, args });
const respond = (content: string) => JSON.stringify({ type: 'respond', content });

/** A tool that holds the event loop (a synchronous computation): the deadline timer cannot fire meanwhile. */
const blocking = (dir: string, ms: number): ToolRegistry =>
  testToolRegistry(dir).add(
    {
      name: 'crunch',
      description: 'Computes for a while without yielding.',
      args_schema: { type: 'object', properties: {}, additionalProperties: false },
      requires_permission: false,
      idempotent: false,
      timeout_ms: 60_000,
      secrets: [],
      sensitive_output: false,
      entry: 'index.js',
    },
    async () => {
      const until = Date.now() + ms;
      while (Date.now() < until);
      return 'crunched';
    },
  );

/** A budget the task's start and first model call do not use up on a loaded 2-core CI machine (they did at 150 ms). */
const LOADED_START_MS = 800;

const withRetries = (modelRetries: number): DisciplineSettings => ({
  ...DEFAULT_DISCIPLINE_SETTINGS,
  retry: { ...DEFAULT_DISCIPLINE_SETTINGS.retry, modelRetries, baseDelayMs: 1, maxDelayMs: 2 },
});

const usageOf = (events: RuntimeEvent[]): TaskUsage | null => {
  const last = events[events.length - 1];
  return last.type === 'TASK_COMPLETED' || last.type === 'TASK_FAILED' ? last.payload.usage : null;
};

describe('replayTask: isolated from the live log, the environment and the wall clock', () => {
  const temp = useTempStore('rl-replay-iso-');

  async function record(
    model: ModelBackend,
    options: { discipline: DisciplineSettings; tools?: ToolRegistry; budgets?: Record<string, number> },
  ): Promise<RuntimeEvent[]> {
    const rt = await startTestRuntime({
      store: temp.store,
      tools: options.tools ?? testToolRegistry(temp.dir),
      permissions: new RuleTablePolicy({}),
      model,
      discipline: options.discipline,
    });
    const { task_id } = await rt.runtime.submit(
      { input: 'do it', budgets: options.budgets },
      { source: 'cli' },
    );
    await rt.runtime.settled(task_id);
    await rt.close();
    return temp.store.readWholeStream(task_id);
  }

  /** Replays under `discipline` (this process's settings), checking the live log is left as it was. */
  async function replay(
    taskId: string,
    discipline: DisciplineSettings,
    tools: ToolRegistry = testToolRegistry(temp.dir),
  ) {
    const before = await temp.store.readAll();
    const result = await replayTask(
      { store: temp.store, tools, discipline, logger: new RecordingRuntimeLogger() },
      taskId,
    );
    expect(await temp.store.readAll()).toEqual(before);
    expect(await temp.store.streamVersion(result.task_id)).toBe(0);
    expect(result.saved).toBe(false);
    return result;
  }

  it('a task whose deadline passed during a model call replays to the same stop, writing nothing live', async () => {
    const recorded = await record(
      new ScriptedBackend({ orchestrator: [{ content: respond('late'), delay_ms: 10_000 }] }),
      { discipline: DEFAULT_DISCIPLINE_SETTINGS, budgets: { timeout_ms: LOADED_START_MS } },
    );
    expect(recorded[recorded.length - 1]).toMatchObject({
      type: 'TASK_FAILED',
      payload: { stop_reason: 'timeout', detail: expect.stringContaining(DEADLINE_PASSED) },
    });
    const { events, progress } = await replay(recorded[0].task_id, DEFAULT_DISCIPLINE_SETTINGS);
    expect(replayDivergence(recorded, events)).toBeNull();
    expect(progress.final).toMatchObject({ stop_reason: 'timeout' });
  });

  it('a task the round guard stopped on its time budget replays to that stop, by the recorded clock', async () => {
    const recorded = await record(
      new ScriptedBackend({ orchestrator: [tool('crunch', {}), respond('done')] }),
      {
        discipline: DEFAULT_DISCIPLINE_SETTINGS,
        tools: blocking(temp.dir, LOADED_START_MS + 400),
        budgets: { timeout_ms: LOADED_START_MS },
      },
    );
    const final = recorded[recorded.length - 1];
    // judged before the next round from the log's times, not by the deadline timer (held up by the tool)
    expect(final).toMatchObject({
      type: 'TASK_FAILED',
      payload: {
        stop_reason: 'timeout',
        detail: expect.stringMatching(new RegExp(`task ran \\d+ ms, over its ${LOADED_START_MS} ms`)),
      },
    });
    // the replay runs in well under the budget by the wall clock; only the recorded times can stop it
    const { events } = await replay(recorded[0].task_id, DEFAULT_DISCIPLINE_SETTINGS, blocking(temp.dir, 0));
    expect(replayDivergence(recorded, events)).toBeNull();
    expect(replayView(events)).toEqual(replayView(recorded));
  });

  it('a run recorded without model retries replays so in a process configured with 3', async () => {
    const failsOnce: ScriptItem[] = [{ error: 'provider_error' }, respond('second answer')];
    const recorded = await record(new ScriptedBackend({ orchestrator: failsOnce }), {
      discipline: withRetries(0),
    });
    // no retry: the orchestrator's failure fell back to sys_util
    expect(recorded.some((e) => e.type === 'GUARD_TRIGGERED' && e.payload.guard === 'retry')).toBe(false);
    const { events } = await replay(recorded[0].task_id, withRetries(3));
    expect(replayDivergence(recorded, events)).toBeNull();
    expect(events[0]).toMatchObject({
      type: 'TASK_RECEIVED',
      payload: { settings: { discipline: { retry: { model_retries: 0 } } } },
    });
  });

  it('a run recorded under one price table replays with its costs under another', async () => {
    const priced: DisciplineSettings = {
      ...DEFAULT_DISCIPLINE_SETTINGS,
      prices: { scripted: { input_per_mtok: 3, output_per_mtok: 15 } },
    };
    const recorded = await record(
      new ScriptedBackend({
        orchestrator: [{ content: respond('done'), usage: { prompt_tokens: 1000, completion_tokens: 500 } }],
      }),
      { discipline: priced },
    );
    expect(usageOf(recorded)?.cost_usd).toBeCloseTo(0.0105);
    const repriced = { ...priced, prices: { scripted: { input_per_mtok: 30, output_per_mtok: 150 } } };
    const { events } = await replay(recorded[0].task_id, repriced);
    expect(replayDivergence(recorded, events)).toBeNull();
    expect(usageOf(events)).toEqual(usageOf(recorded));
  });

  it('a log written before settings were recorded replays under this process settings', async () => {
    const recorded = await record(new ScriptedBackend({ orchestrator: [respond('old')] }), {
      discipline: DEFAULT_DISCIPLINE_SETTINGS,
    });
    const [received, ...rest] = recorded;
    if (received.type !== 'TASK_RECEIVED') throw new Error('not a task');
    const { settings: _recorded, ...payload } = received.payload;
    await temp.store.append(
      'task_old',
      [
        { type: 'TASK_RECEIVED', payload },
        ...rest.map((e) => ({ type: e.type, payload: e.payload }) as never),
      ],
      { expected: 'no_stream' },
    );
    const { events } = await replay('task_old', DEFAULT_DISCIPLINE_SETTINGS);
    expect(replayDivergence(await temp.store.readWholeStream('task_old'), events)).toBeNull();
    expect(events[0].type === 'TASK_RECEIVED' && events[0].payload.settings).toBeUndefined();
  });

  it('save writes the replayed task, ended with its stop reason, to the live log', async () => {
    const recorded = await record(
      new ScriptedBackend({ orchestrator: [{ content: respond('late'), delay_ms: 10_000 }] }),
      { discipline: DEFAULT_DISCIPLINE_SETTINGS, budgets: { timeout_ms: LOADED_START_MS } },
    );
    const result = await replayTask(
      { store: temp.store, tools: testToolRegistry(temp.dir), logger: new RecordingRuntimeLogger() },
      recorded[0].task_id,
      { save: true },
    );
    expect(result.saved).toBe(true);
    const saved = await temp.store.readWholeStream(result.task_id);
    expect(saved).toEqual(result.events);
    expect(saved[saved.length - 1]).toMatchObject({
      type: 'TASK_FAILED',
      payload: { stop_reason: 'timeout' },
    });
    expect(replayDivergence(recorded, saved)).toBeNull();
  });

  it('a divergence names the event, the field and both values', async () => {
    const recorded = await record(
      new ScriptedBackend({ orchestrator: [tool('echo', { text: 'hi' }), respond('done')] }),
      { discipline: DEFAULT_DISCIPLINE_SETTINGS },
    );
    const { events } = await replay(recorded[0].task_id, DEFAULT_DISCIPLINE_SETTINGS);
    const calledAt = events.findIndex((e) => e.type === 'MODEL_CALLED');
    const forced = events.map((e, i) =>
      i === calledAt && e.type === 'MODEL_CALLED'
        ? { ...e, payload: { ...e.payload, role: 'coder' as const } }
        : e,
    );
    expect(replayDivergence(recorded, forced)).toEqual({
      at: calledAt + 1,
      detail: `event ${calledAt + 1} (MODEL_CALLED) payload.role: recorded 'orchestrator', replayed 'coder'`,
    });
    const echoed = events.map((e) =>
      e.type === 'TOOL_CALLED' ? { ...e, payload: { ...e.payload, args: { text: 'ho' } } } : e,
    );
    expect(replayDivergence(recorded, echoed)?.detail).toMatch(
      /^event \d+ \(TOOL_CALLED\) payload\.args\.text: recorded 'hi', replayed 'ho'$/,
    );
    expect(replayDivergence(recorded, events.slice(0, -1))?.detail).toMatch(
      /^event \d+: recorded TASK_COMPLETED, replayed nothing$/,
    );
  });

  it("a fork continues under the settings its source recorded: its prices and retries, not this process's", async () => {
    const recordedUnder: DisciplineSettings = {
      ...withRetries(0),
      prices: { scripted: { input_per_mtok: 3, output_per_mtok: 15 } },
    };
    const source = await record(
      new ScriptedBackend({
        orchestrator: [
          { content: tool('echo', { text: 'hi' }), usage: { prompt_tokens: 1000, completion_tokens: 500 } },
          respond('done'),
        ],
      }),
      { discipline: recordedUnder },
    );
    const afterTool = source.findIndex((e) => e.type === 'TOOL_COMPLETED') + 1;
    /** Forks the source after its tool call in a process with 3 retries and ten times the prices. */
    const forkWith = async (orchestrator: ScriptItem[]) => {
      const rt = await startTestRuntime({
        store: temp.store,
        tools: testToolRegistry(temp.dir),
        permissions: new RuleTablePolicy({}),
        // a script serves a task's calls by their index in its log: the source's first call is copied
        model: new ScriptedBackend({ orchestrator: ['(the copied call)', ...orchestrator] }),
        discipline: { ...withRetries(3), prices: { scripted: { input_per_mtok: 30, output_per_mtok: 150 } } },
      });
      try {
        const { task_id } = await rt.runtime.fork(source[0].task_id, afterTool);
        await rt.runtime.settled(task_id);
        return await temp.store.readWholeStream(task_id);
      } finally {
        await rt.close();
      }
    };

    const priced = await forkWith([
      { content: respond('forked'), usage: { prompt_tokens: 1000, completion_tokens: 100 } },
    ]);
    expect(priced[0]).toMatchObject({
      type: 'TASK_RECEIVED',
      payload: { settings: { discipline: { retry: { model_retries: 0 } } } },
    });
    expect(priced[priced.length - 1]).toMatchObject({ type: 'TASK_COMPLETED' });
    // the copied call as recorded (3/15: 0.0105) and the fork's own at the recorded prices too (0.0045)
    expect(usageOf(priced)?.cost_usd).toBeCloseTo(0.015, 9);

    // the fork's next call fails once: recorded without retries, it falls back instead of retrying
    const failing = await forkWith([{ error: 'provider_error' }, respond('retried')]);
    expect(failing.some((e) => e.type === 'GUARD_TRIGGERED' && e.payload.guard === 'retry')).toBe(false);
    expect(failing.some((e) => e.type === 'ROUTER_DECIDED' && e.payload.source === 'sys_util')).toBe(true);
  });
});
