import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InMemoryEventStore } from '@runledger/event-store';
import { ModelBackend } from '../model/model-backend';
import { ScriptedBackend } from '../model/scripted-backend';
import { SysUtilBackend } from '../model/sys-util';
import { recordedJitter } from './recorded-parts';
import { replayTask } from '../runtime.module';
import { compareReplay, replayView } from './replay-view';
import { DEFAULT_DISCIPLINE_SETTINGS, DisciplineSettings } from '../discipline/settings';
import { backoffDelay } from '../discipline/failure-policy';
import { EventLogBuilder } from '../discipline/testing-events';
import {
  RecordingRuntimeLogger,
  RuleTablePolicy,
  manifestOf,
  startTestRuntime,
  testToolRegistry,
} from '../testing';
import { useTempStore } from '../testing/temp-store';

describe('replayTask', () => {
  const temp = useTempStore('rl-replay-');

  async function record(
    model: ModelBackend,
    input: string,
    policy = new RuleTablePolicy({}),
    discipline?: DisciplineSettings,
  ) {
    const rt = await startTestRuntime({
      store: temp.store,
      tools: testToolRegistry(temp.dir),
      permissions: policy,
      model,
      discipline,
    });
    const { task_id } = await rt.runtime.submit({ input }, { source: 'cli' });
    await rt.runtime.settled(task_id);
    await rt.close();
    return task_id;
  }

  const startWith = (model: ModelBackend) =>
    startTestRuntime({
      store: temp.store,
      tools: testToolRegistry(temp.dir),
      permissions: new RuleTablePolicy({}),
      model,
    });

  /** the task's run ended, by whatever woke it (a due timer, a signal) */
  async function untilEnded(rt: Awaited<ReturnType<typeof startWith>>, taskId: string) {
    for (let end = Date.now() + 5_000; !(await rt.runtime.progress(taskId)).final;) {
      if (Date.now() > end) throw new Error(`task ${taskId} never ended`);
      await new Promise((r) => setTimeout(r, 20));
    }
    await rt.runtime.settled(taskId);
  }

  async function expectSameRun(taskId: string, discipline?: DisciplineSettings) {
    // Replaying must not touch the workspace: remove what the original run wrote.
    rmSync(temp.dir, { recursive: true, force: true });
    const { events: replayed } = await replayTask(
      {
        store: temp.store,
        tools: testToolRegistry(temp.dir),
        discipline,
        logger: new RecordingRuntimeLogger(),
      },
      taskId,
    );
    const original = await temp.store.readWholeStream(taskId);
    expect(replayView(replayed)).toEqual(replayView(original));
    return replayed;
  }

  it('a sys_util plan replays event for event without running a tool', async () => {
    writeFileSync(join(temp.dir, 'in.txt'), 'recorded content');
    const id = await record(new SysUtilBackend(), 'run echo hi then read in.txt');
    const replayed = await expectSameRun(id);
    expect(replayed[replayed.length - 1]).toMatchObject({
      type: 'TASK_COMPLETED',
      payload: { result: expect.stringContaining('recorded content') },
    });
  });

  it('a task sys_util does not understand replays to the same not_understood stop', async () => {
    const id = await record(new SysUtilBackend(), 'list the files 1');
    const original = await temp.store.readWholeStream(id);
    expect(original.map((e) => e.type)).toEqual([
      'TASK_RECEIVED',
      'CONTEXT_BUILT',
      'MODEL_CALLED',
      'MODEL_RESPONDED',
      'TASK_FAILED',
    ]);
    const { events: replayed } = await replayTask(
      { store: temp.store, tools: testToolRegistry(temp.dir), logger: new RecordingRuntimeLogger() },
      id,
    );
    expect(compareReplay(original, replayed)).toEqual({
      matches: true,
      compared: 5,
      diverged_at: null,
      detail: null,
    });
    expect(replayed[replayed.length - 1]).toMatchObject({
      type: 'TASK_FAILED',
      payload: { stop_reason: 'not_understood', result: expect.stringContaining('No model is configured') },
    });
  });

  it('a scripted run with a correction, a failing step and streamed chunks replays', async () => {
    const plan = {
      type: 'plan',
      steps: [
        { id: 'a', kind: 'tool', tool: 'echo', args: { text: 'A' } },
        { id: 'b', kind: 'tool', tool: 'file_read', args: { path: 'nope.txt' }, depends_on: ['a'] },
      ],
    };
    const model = new ScriptedBackend({
      orchestrator: [
        'not json',
        JSON.stringify(plan),
        {
          content: '{"type":"respond","content":"partly done"}',
          chunks: ['{"type":"respond","con', 'tent":"partly', ' done"}'],
        },
      ],
    });
    const id = await record(model, 'mixed run');
    const replayed = await expectSameRun(id);
    expect(replayed.filter((e) => e.type === 'OUTPUT_CHUNK').length).toBeGreaterThan(0);
    expect(replayed.some((e) => e.type === 'PLAN_FAILED')).toBe(true);
  });

  it('a run that waited on a timer replays with the recorded due time and firing, without waiting', async () => {
    const model = new ScriptedBackend({
      orchestrator: [
        JSON.stringify({ type: 'wait', duration_ms: 300 }),
        JSON.stringify({ type: 'respond', content: 'after the wait' }),
      ],
    });
    const rt = await startWith(model);
    const { task_id } = await rt.runtime.submit({ input: 'wait a little' }, { source: 'cli' });
    // the run stops at the timer, holding nothing; the process's due timers fire it
    expect((await rt.runtime.settled(task_id)).status).toBe('waiting');
    await untilEnded(rt, task_id);
    await rt.close();
    const started = Date.now();
    const replayed = await expectSameRun(task_id);
    // the replay never waits the recorded 300 ms by the wall clock
    expect(Date.now() - started).toBeLessThan(3_000);
    const original = await temp.store.readWholeStream(task_id);
    const setOf = (events: typeof original) => events.find((e) => e.type === 'TIMER_SET')?.payload;
    expect(setOf(replayed)).toEqual(setOf(original));
    expect(replayed.filter((e) => e.type === 'TIMER_FIRED')).toHaveLength(1);
    expect(replayed[replayed.length - 1]).toMatchObject({ type: 'TASK_COMPLETED' });
  });

  it('a run woken by a signal, and one whose wait timed out, replay with the recorded outcome', async () => {
    const model = new ScriptedBackend({
      orchestrator: [
        JSON.stringify({ type: 'wait_for_signal', name: 'paid', timeout_ms: 200 }),
        JSON.stringify({ type: 'wait_for_signal', name: 'paid' }),
        JSON.stringify({ type: 'respond', content: 'paid' }),
      ],
    });
    const rt = await startWith(model);
    const { task_id } = await rt.runtime.submit({ input: 'wait to be paid' }, { source: 'cli' });
    // the first wait times out by the wall clock; the second is ended by a signal
    for (let end = Date.now() + 5_000; ;) {
      const p = await rt.runtime.progress(task_id);
      if (p.signalWaits.size === 2 && p.status === 'waiting') break;
      if (Date.now() > end) throw new Error(`the second wait never started: ${p.status}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const sent = await rt.runtime.sendSignal(task_id, { name: 'paid', payload: { amount: 5 } });
    expect(sent.taken_by).not.toBeNull();
    await untilEnded(rt, task_id);
    await rt.close();
    const replayed = await expectSameRun(task_id);
    const steps = replayed.filter((e) => e.type === 'STEP_FAILED' || e.type === 'STEP_COMPLETED');
    expect(steps.map((e) => e.type)).toEqual(['STEP_FAILED', 'STEP_COMPLETED']);
    expect(replayed.find((e) => e.type === 'SIGNAL_RECEIVED')?.payload).toEqual(
      (await temp.store.readWholeStream(task_id)).find((e) => e.type === 'SIGNAL_RECEIVED')?.payload,
    );
  });

  it('a signal kept before its wait began replays where the recording received it', async () => {
    const model = new ScriptedBackend({
      orchestrator: [
        '{"type":"tool","tool":"echo","args":{"text":"first"}}',
        // the signal comes while the model decides on the wait: before the wait began
        { content: JSON.stringify({ type: 'wait_for_signal', name: 'paid' }), delay_ms: 400 },
        JSON.stringify({ type: 'respond', content: 'paid' }),
      ],
    });
    const rt = await startWith(model);
    const { task_id } = await rt.runtime.submit({ input: 'echo, then wait to be paid' }, { source: 'cli' });
    const modelCalls = async () =>
      (await temp.store.readWholeStream(task_id)).filter((e) => e.type === 'MODEL_CALLED').length;
    for (let end = Date.now() + 5_000; (await modelCalls()) < 2;) {
      if (Date.now() > end) throw new Error('the second model call never began');
      await new Promise((r) => setTimeout(r, 10));
    }
    const sent = await rt.runtime.sendSignal(task_id, { name: 'paid', payload: { amount: 5 } });
    expect(sent.taken_by).toBeNull();
    await untilEnded(rt, task_id);
    await rt.close();
    const original = await temp.store.readWholeStream(task_id);
    const types = original.map((e) => e.type);
    expect(types.indexOf('SIGNAL_RECEIVED')).toBeLessThan(types.indexOf('SIGNAL_AWAITED'));
    const replayed = await expectSameRun(task_id);
    expect(replayed.filter((e) => e.type === 'SIGNAL_RECEIVED')).toHaveLength(1);
    expect(replayed[replayed.length - 1]).toMatchObject({ type: 'TASK_COMPLETED' });
  });

  it('a provider error that fell back to sys_util replays the same fallback', async () => {
    const model = new ScriptedBackend({
      orchestrator: [{ error: 'provider_error' }, '{"type":"respond","content":"fine"}'],
    });
    const id = await record(model, 'run echo fallback');
    const replayed = await expectSameRun(id);
    expect(replayed.find((e) => e.type === 'ROUTER_DECIDED')?.payload).toMatchObject({ source: 'sys_util' });
  });

  it('a tools-protocol model that fell back to sys_util replays event for event, the model still asked natively', async () => {
    const model = new ScriptedBackend({
      orchestrator: [
        { error: 'provider_error' },
        { content: 'echoed, done', tool_calls: [] },
        { content: 'spare', tool_calls: [] },
      ],
    });
    const id = await record(model, 'run echo fallback');
    const replayed = await expectSameRun(id);
    expect(replayed.find((e) => e.type === 'ROUTER_DECIDED')?.payload).toMatchObject({ source: 'sys_util' });
    expect(replayed.filter((e) => e.type === 'MODEL_CALLED').length).toBeGreaterThan(2);
  });

  it("after a fallback sys_util's help says the model could not answer, never that none is configured; it replays", async () => {
    const model = new ScriptedBackend({
      orchestrator: [{ error: 'provider_error', message: 'upstream 502' }],
    });
    const id = await record(model, 'what is the capital of France?');
    const replayed = await expectSameRun(id);
    const answers = replayed.filter((e) => e.type === 'MODEL_RESPONDED' && e.payload.model === 'sys_util');
    expect(answers).toHaveLength(1);
    const help = answers[0].type === 'MODEL_RESPONDED' ? String(answers[0].payload.content) : '';
    expect(help).toContain('The model could not answer');
    expect(help).not.toContain('No model is configured');
  });

  it('a denied call is denied again in the replay', async () => {
    const model = new ScriptedBackend({
      orchestrator: [
        '{"type":"tool","tool":"echo","args":{"text":"x"}}',
        '{"type":"fail","reason":"denied"}',
      ],
    });
    const id = await record(model, 'deny', new RuleTablePolicy({ echo: 'deny' }));
    const replayed = await expectSameRun(id);
    expect(replayed.find((e) => e.type === 'TOOL_FAILED')?.payload).toMatchObject({
      error_kind: 'permission_denied',
    });
  });

  it('retries with random jitter replay with the delays they recorded', async () => {
    const discipline: DisciplineSettings = {
      ...DEFAULT_DISCIPLINE_SETTINGS,
      retry: { modelRetries: 3, toolRetries: 0, baseDelayMs: 40, maxDelayMs: 80, maxRetryAfterMs: 1000 },
    };
    const model = new ScriptedBackend({
      orchestrator: [
        { error: 'provider_error' },
        { error: 'timeout' },
        { error: 'rate_limited', retry_after_ms: 150 },
        '{"type":"respond","content":"after three retries"}',
      ],
    });
    const id = await record(model, 'write me a poem', undefined, discipline);
    const replayed = await expectSameRun(id, discipline);
    const delays = replayed.flatMap((e) =>
      e.type === 'GUARD_TRIGGERED' && e.payload.guard === 'retry' ? [e.payload.data.delay_ms] : [],
    );
    expect(delays).toHaveLength(3);
    expect(delays[2]).toBe(150);
  });
});

describe('recordedJitter', () => {
  const retry = { baseDelayMs: 100, maxDelayMs: 300 };
  const retried = (delays: Array<[number, number]>) =>
    delays.reduce(
      (log, [delay_ms, next_attempt]) =>
        log.add('GUARD_TRIGGERED', {
          guard: 'retry',
          round: 1,
          detail: 'retry',
          data: { kind: 'provider_error', delay_ms, next_attempt },
        }),
      new EventLogBuilder().received(),
    ).events;

  it('draws what gives each recorded backoff again, in order', () => {
    const recorded: Array<[number, number]> = [
      [73, 2],
      [200, 3],
      [151, 4],
      [299, 5],
    ];
    const rng = recordedJitter(retried(recorded), retry);
    expect(recorded.map(([, next]) => backoffDelay(next - 1, retry, rng))).toEqual([73, 200, 151, 299]);
  });

  it('a delay set by Retry-After comes out again with it; past the recording the rest draws', () => {
    const rng = recordedJitter(retried([[5000, 2]]), retry, () => 0.25);
    expect(backoffDelay(1, retry, rng, 5000)).toBe(5000);
    expect(rng()).toBe(0.25);
  });

  it('without retry settings (no run discipline) nothing is recorded to reproduce', () => {
    expect(recordedJitter(retried([[73, 2]]), undefined, () => 0.9)()).toBe(0.9);
  });
});

describe('replayTask: an idempotent tool retried after a tool_error', () => {
  it('each attempt gets the outcome it recorded (the failure, then the success)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rl-replay-retry-'));
    const store = new InMemoryEventStore();
    const discipline: DisciplineSettings = {
      ...DEFAULT_DISCIPLINE_SETTINGS,
      retry: { ...DEFAULT_DISCIPLINE_SETTINGS.retry, toolRetries: 1, baseDelayMs: 1, maxDelayMs: 2 },
    };
    let attempts = 0;
    const flaky = () =>
      testToolRegistry(dir).add(
        manifestOf('flaky_read', { idempotent: true, timeout_ms: 5_000 }),
        async () => {
          if (attempts++ === 0) throw new Error('busy, try again');
          return 'read at last';
        },
      );
    try {
      const rt = await startTestRuntime({
        store,
        tools: flaky(),
        permissions: new RuleTablePolicy({}),
        model: new ScriptedBackend({
          orchestrator: [
            '{"type":"tool","tool":"flaky_read","args":{}}',
            '{"type":"respond","content":"ok"}',
          ],
        }),
        discipline,
      });
      const { task_id: id } = await rt.runtime.submit({ input: 'read' }, { source: 'cli' });
      await rt.runtime.settled(id);
      await rt.close();
      const original = await store.readWholeStream(id);
      expect(
        original.filter((e) => e.type === 'TOOL_FAILED' || e.type === 'TOOL_COMPLETED').map((e) => e.type),
      ).toEqual(['TOOL_FAILED', 'TOOL_COMPLETED']);
      const { events } = await replayTask(
        { store, tools: flaky(), discipline, logger: new RecordingRuntimeLogger() },
        id,
      );
      expect(replayView(events)).toEqual(replayView(original));
      expect(attempts).toBe(2);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('replayTask: calls that ran side by side', () => {
  it('their outcomes reach the log in the order the recording completed them, not the order they were asked', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rl-replay-side-by-side-'));
    const store = new InMemoryEventStore();
    const readTool = (name: string, delayMs: number) => ({
      manifest: manifestOf(name, { idempotent: true, timeout_ms: 5_000 }),
      run: async () => {
        await new Promise((resolve) => setTimeout(resolve, delayMs));
        return `${name} done`;
      },
    });
    const tools = () =>
      testToolRegistry(dir)
        .add(readTool('slow_read', 150).manifest, readTool('slow_read', 150).run)
        .add(readTool('quick_read', 0).manifest, readTool('quick_read', 0).run);
    const completions = (events: readonly { type: string; payload: unknown }[]) =>
      events
        .filter((e) => e.type === 'TOOL_COMPLETED')
        .map((e) => (e.payload as { call_id: string }).call_id);
    try {
      const rt = await startTestRuntime({
        store,
        tools: tools(),
        permissions: new RuleTablePolicy({}),
        model: new ScriptedBackend({
          orchestrator: [
            {
              content: '',
              tool_calls: [
                { id: 'c1', name: 'slow_read', arguments: '{}' },
                { id: 'c2', name: 'quick_read', arguments: '{}' },
              ],
            },
            { content: 'both read' },
          ],
        }),
      });
      const { task_id: id } = await rt.runtime.submit({ input: 'read both' }, { source: 'cli' });
      await rt.runtime.settled(id);
      await rt.close();
      const original = await store.readWholeStream(id);
      expect(completions(original)).toEqual(['call_1_c2', 'call_1_c1']);
      const { events } = await replayTask(
        { store, tools: tools(), logger: new RecordingRuntimeLogger() },
        id,
      );
      expect(completions(events)).toEqual(['call_1_c2', 'call_1_c1']);
      expect(replayView(events)).toEqual(replayView(original));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
