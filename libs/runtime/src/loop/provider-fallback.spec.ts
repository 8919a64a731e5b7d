import { ConfigError, RuntimeEvent } from '@runledger/contracts';
import { DEFAULT_DISCIPLINE_SETTINGS, DisciplineSettings } from '../discipline/settings';
import { seededRandom } from '../discipline/failure-policy';
import { ModelBackend } from '../model/model-backend';
import { ModelScript, ScriptedBackend } from '../model/scripted-backend';
import { replayTask } from '../runtime.module';
import { replayView } from '../replay/replay-view';
import {
  AllowAllPolicy,
  RecordingRuntimeLogger,
  startTestRuntime,
  TestRuntime,
  testToolRegistry,
} from '../testing';
import { useTempStore } from '../testing/temp-store';

/** The orchestrator's provider chain with scripted providers: retries, switches, stickiness, replay. */
const settings: DisciplineSettings = {
  ...DEFAULT_DISCIPLINE_SETTINGS,
  retry: { modelRetries: 2, toolRetries: 0, baseDelayMs: 1, maxDelayMs: 4, maxRetryAfterMs: 1000 },
};

const provider = (name: string, orchestrator: ModelScript['orchestrator']) =>
  new ScriptedBackend({ orchestrator }, { backend: name });

const ERR = { error: 'provider_error' as const, message: 'upstream 500' };
const respond = (content: string) => JSON.stringify({ type: 'respond', content });

/** Model events and guards, as one line each, in log order. */
const trail = (events: RuntimeEvent[]): string[] =>
  events.flatMap((e) => {
    switch (e.type) {
      case 'MODEL_CALLED':
        return [`called ${e.payload.model}#${e.payload.attempt}`];
      case 'MODEL_RESPONDED':
        return [e.payload.error ? `failed ${e.payload.error.kind}` : `answered ${e.payload.model}`];
      case 'GUARD_TRIGGERED':
        return e.payload.guard === 'fallback'
          ? [`fallback ${String(e.payload.data.from)} -> ${String(e.payload.data.to)}`]
          : e.payload.guard === 'retry'
            ? [`retry ${String(e.payload.data.provider)}`]
            : [e.payload.guard];
      case 'ROUTER_DECIDED':
        return [`decided by ${e.payload.source}`];
      default:
        return [];
    }
  });

describe('orchestrator fallback providers', () => {
  const temp = useTempStore('rl-fallback-', () => rt?.close());
  let rt: TestRuntime;

  const run = async (
    model: ModelBackend,
    fallbackModels: ModelBackend[],
    input = 'write me a poem',
    discipline = settings,
  ) => {
    rt = await startTestRuntime({
      store: temp.store,
      tools: testToolRegistry(temp.dir),
      permissions: new AllowAllPolicy(),
      model,
      fallbackModels,
      discipline,
      rng: seededRandom(3),
    });
    const { task_id } = await rt.runtime.submit({ input }, { source: 'cli' });
    const progress = await rt.runtime.settled(task_id);
    await rt.close();
    return { task_id, progress, events: await temp.store.readWholeStream(task_id) };
  };

  it('the primary fails its retries, the next provider answers: retries and the switch are events in order', async () => {
    const { progress, events } = await run(provider('A', [ERR, ERR, ERR]), [
      provider('B', [respond('from B')]),
    ]);
    expect(progress.final).toMatchObject({ stop_reason: 'completed', result: 'from B' });
    expect(trail(events)).toEqual([
      'called A#1',
      'failed provider_error',
      'retry A',
      'called A#2',
      'failed provider_error',
      'retry A',
      'called A#3',
      'failed provider_error',
      'fallback A -> B',
      'called B#1',
      'answered B',
      'decided by orchestrator',
    ]);
    const sw = events.find((e) => e.type === 'GUARD_TRIGGERED' && e.payload.guard === 'fallback');
    expect(sw?.payload).toMatchObject({
      round: 1,
      detail: 'provider_error after 3 attempts; falling back to B',
      data: { role: 'orchestrator', kind: 'provider_error', from: 'A', to: 'B', attempts: 3 },
    });
    expect(events.find((e) => e.type === 'ROUTER_DECIDED')?.payload).toMatchObject({
      fallback_reason: 'provider_error after 3 attempts; falling back to B',
    });
    expect(progress.usage).toMatchObject({ model_calls: 4 });
  });

  it('after a switch the task stays on the fallback provider: later rounds do not ask the primary again', async () => {
    const primary = provider('A', [ERR, ERR, ERR, respond('primary is back')]);
    const { progress, events } = await run(primary, [
      provider('B', ['{"type":"tool","tool":"echo","args":{"text":"x"}}', respond('B again')]),
    ]);
    expect(progress.final).toMatchObject({ stop_reason: 'completed', result: 'B again' });
    const called = events.flatMap((e) => (e.type === 'MODEL_CALLED' ? [e.payload.model] : []));
    expect(called).toEqual(['A', 'A', 'A', 'B', 'B']);
  });

  it('a chain of three: A and B fail their retries, C answers', async () => {
    const { progress, events } = await run(provider('A', [ERR, ERR, ERR]), [
      provider('B', [{ error: 'timeout' }, { error: 'timeout' }, { error: 'timeout' }]),
      provider('C', [respond('from C')]),
    ]);
    expect(progress.final).toMatchObject({ stop_reason: 'completed', result: 'from C' });
    expect(trail(events).filter((l) => l.startsWith('fallback'))).toEqual([
      'fallback A -> B',
      'fallback B -> C',
    ]);
  });

  it('a Retry-After longer than we wait switches at once, without retrying the primary', async () => {
    const { progress, events } = await run(
      provider('A', [{ error: 'rate_limited', retry_after_ms: 60_000 }]),
      [provider('B', [respond('from B')])],
    );
    expect(progress.final).toMatchObject({ stop_reason: 'completed', result: 'from B' });
    expect(trail(events).slice(0, 4)).toEqual([
      'called A#1',
      'failed rate_limited',
      'fallback A -> B',
      'called B#1',
    ]);
  });

  it('authentication_error on the primary stops at once; the fallback provider is never asked', async () => {
    const secondary = provider('B', [respond('must not be used')]);
    const { progress, events } = await run(provider('A', [{ error: 'authentication_error' }]), [secondary]);
    expect(progress.final?.stop_reason).toBe('authentication_error');
    expect(trail(events)).toEqual(['called A#1', 'failed authentication_error']);
  });

  it('authentication_error on a fallback provider stops too: no walk on down the chain', async () => {
    const { progress, events } = await run(provider('A', [ERR, ERR, ERR]), [
      provider('B', [{ error: 'authentication_error', message: 'bad key' }]),
      provider('C', [respond('must not be used')]),
    ]);
    expect(progress.final?.stop_reason).toBe('authentication_error');
    expect(progress.final?.detail).toContain('(B)');
    expect(events.some((e) => e.type === 'MODEL_CALLED' && e.payload.model === 'C')).toBe(false);
  });

  it('every provider failing ends in the sys_util fallback, named from the last provider', async () => {
    const { progress, events } = await run(
      provider('A', [ERR, ERR, ERR]),
      [provider('B', [ERR, ERR, ERR])],
      'run echo via sys_util',
    );
    expect(progress.final).toMatchObject({ stop_reason: 'completed' });
    const sw = (l: string) => l.startsWith('fallback') || l.startsWith('decided');
    // Round 2 starts at B, where the task stands (its script is spent: provider errors), then sys_util again.
    expect(trail(events).filter(sw)).toEqual([
      'fallback A -> B',
      'fallback B -> sys_util',
      'decided by sys_util',
      'fallback B -> sys_util',
      'decided by sys_util',
    ]);
    const called = events.flatMap((e) => (e.type === 'MODEL_CALLED' ? [e.payload.model] : []));
    expect(called).toEqual(['A', 'A', 'A', 'B', 'B', 'B', 'sys_util', 'B', 'B', 'B', 'sys_util']);
  });

  it('every provider failing on input sys_util cannot read stops with the last failure', async () => {
    const { progress } = await run(provider('A', [ERR, ERR, ERR]), [
      provider('B', [{ error: 'timeout' }, { error: 'timeout' }, { error: 'timeout' }]),
    ]);
    expect(progress.final?.stop_reason).toBe('timeout');
  });

  it('a fallback provider that does not serve the orchestrator role is skipped', async () => {
    const coderOnly = new ScriptedBackend({ coder: ['code'] }, { backend: 'coder-only' });
    const { progress, events } = await run(provider('A', [ERR, ERR, ERR]), [
      coderOnly,
      provider('B', [respond('from B')]),
    ]);
    expect(progress.final).toMatchObject({ result: 'from B' });
    expect(trail(events)).toContain('fallback A -> B');
  });

  it('providers with the same label are refused', async () => {
    await expect(
      startTestRuntime({
        store: temp.store,
        tools: testToolRegistry(temp.dir),
        permissions: new AllowAllPolicy(),
        model: provider('A', []),
        fallbackModels: [provider('A', [])],
      }),
    ).rejects.toThrow(ConfigError);
  });

  describe('the coder role walks the same chain', () => {
    const codePlan = JSON.stringify({
      type: 'plan',
      steps: [
        { id: 'code', kind: 'coder', args: { prompt: 'write a haiku' } },
        {
          id: 'say',
          kind: 'respond',
          args: { content: 'coder said: ${steps.code.output}' },
          depends_on: ['code'],
        },
      ],
    });

    it('a coder step whose provider fails its retries is served by the next provider', async () => {
      const a = new ScriptedBackend({ orchestrator: [codePlan], coder: [ERR, ERR, ERR] }, { backend: 'A' });
      const b = new ScriptedBackend({ coder: ['logs, lines, and time'] }, { backend: 'B' });
      const { progress, events } = await run(a, [b]);
      expect(progress.final).toMatchObject({
        stop_reason: 'completed',
        result: 'coder said: logs, lines, and time',
      });
      const sw = events.find((e) => e.type === 'GUARD_TRIGGERED' && e.payload.guard === 'fallback');
      expect(sw?.payload).toMatchObject({ data: { role: 'coder', from: 'A', to: 'B' } });
      const coderCalls = events.flatMap((e) =>
        e.type === 'MODEL_CALLED' && e.payload.role === 'coder'
          ? [`${e.payload.model}#${e.payload.attempt}`]
          : [],
      );
      expect(coderCalls).toEqual(['A#1', 'A#2', 'A#3', 'B#1']);
    });

    it('when every provider fails, the coder step fails (no sys_util coder) and the orchestrator hears of it', async () => {
      const a = new ScriptedBackend(
        { orchestrator: [codePlan, '{"type":"fail","reason":"no coder today"}'], coder: [ERR, ERR, ERR] },
        { backend: 'A' },
      );
      const b = new ScriptedBackend({ coder: [ERR, ERR, ERR] }, { backend: 'B' });
      const { progress, events } = await run(a, [b]);
      expect(progress.final?.stop_reason).not.toBe('completed');
      expect(events.find((e) => e.type === 'STEP_FAILED')?.payload).toMatchObject({
        step_id: 'code',
        error: 'coder: upstream 500',
      });
      expect(trail(events).filter((l) => l.startsWith('fallback'))).toEqual(['fallback A -> B']);
    });
  });

  it('compaction through the utility role falls back too; later compactions start at the fallback', async () => {
    const tight: DisciplineSettings = {
      ...settings,
      prompt: {
        ...settings.prompt,
        contextWindowTokens: 1200,
        maxTokens: 100,
        safetyMargin: 0,
        maxTrimItems: 0,
        keepRecentHistory: 1,
        summaryTokens: 40,
      },
    };
    const echoes = Array.from({ length: 5 }, (_, i) =>
      JSON.stringify({ type: 'tool', tool: 'echo', args: { text: `${i}`.repeat(500) } }),
    );
    const a = new ScriptedBackend(
      { orchestrator: [...echoes, respond('done')], utility: [ERR, ERR, ERR] },
      { backend: 'A' },
    );
    const b = new ScriptedBackend({ utility: Array(10).fill('five long echoes') }, { backend: 'B' });
    const { progress, events } = await run(a, [b], 'echo a lot', tight);
    expect(progress.final?.stop_reason).toBe('completed');
    const utility = events.flatMap((e) =>
      e.type === 'MODEL_CALLED' && e.payload.role === 'utility' ? [e.payload.model] : [],
    );
    expect(utility.slice(0, 4)).toEqual(['A', 'A', 'A', 'B']);
    expect(utility.length).toBeGreaterThan(4);
    expect(utility.slice(4).every((m) => m === 'B')).toBe(true);
    const compactions = events.filter(
      (e) => e.type === 'GUARD_TRIGGERED' && e.payload.guard === 'compaction',
    );
    expect(compactions.length).toBeGreaterThan(0);
    expect(trail(events)).toContain('fallback A -> B');
  });

  describe('replay', () => {
    const replayed = async (taskId: string) => {
      const { events } = await replayTask(
        {
          store: temp.store,
          tools: testToolRegistry(temp.dir),
          discipline: settings,
          rng: seededRandom(3),
          logger: new RecordingRuntimeLogger(),
        },
        taskId,
      );
      return events;
    };

    it('a run served by a fallback provider over several rounds replays event for event', async () => {
      const { task_id, events } = await run(provider('A', [ERR, ERR, ERR]), [
        provider('B', [
          { error: 'rate_limited', retry_after_ms: 2 },
          '{"type":"tool","tool":"echo","args":{"text":"x"}}',
          respond('done by B'),
        ]),
      ]);
      const again = await replayed(task_id);
      expect(replayView(again)).toEqual(replayView(events));
      expect(trail(again)).toContain('fallback A -> B');
      expect(again[again.length - 1]).toMatchObject({
        type: 'TASK_COMPLETED',
        payload: { result: 'done by B' },
      });
    });

    it('a coder step served by the fallback provider replays event for event', async () => {
      const plan = JSON.stringify({
        type: 'plan',
        steps: [{ id: 'code', kind: 'coder', args: { prompt: 'x' } }],
      });
      const a = new ScriptedBackend(
        { orchestrator: [plan, respond('done')], coder: [ERR, ERR, ERR] },
        { backend: 'A' },
      );
      const b = new ScriptedBackend({ coder: ['the code'] }, { backend: 'B' });
      const { task_id, events } = await run(a, [b]);
      expect(events[events.length - 1].type).toBe('TASK_COMPLETED');
      const again = await replayed(task_id);
      expect(replayView(again)).toEqual(replayView(events));
    });

    it('a run that went down the whole chain to sys_util replays the same switches', async () => {
      const { task_id, events } = await run(
        provider('A', [ERR, ERR, ERR]),
        [provider('B', [ERR, ERR, ERR])],
        'run echo via sys_util',
      );
      const again = await replayed(task_id);
      expect(replayView(again)).toEqual(replayView(events));
    });
  });
});
