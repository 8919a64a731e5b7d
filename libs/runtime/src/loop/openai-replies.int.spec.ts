import { RuntimeEvent } from '@runledger/contracts';
import { FakeOpenAiServer, startFakeOpenAiServer } from '@runledger/testing';
import { DEFAULT_DISCIPLINE_SETTINGS, DisciplineSettings } from '../discipline/settings';
import { seededRandom } from '../discipline/failure-policy';
import { OpenAiBackend } from '../model/openai-backend';
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

/**
 * Whole replies (RUNLEDGER_MODEL_STREAM=off) from a local OpenAI-compatible server, through the
 * runtime: what the runtime does with replies it cannot act on as they came.
 */
const settings: DisciplineSettings = {
  ...DEFAULT_DISCIPLINE_SETTINGS,
  retry: { modelRetries: 2, toolRetries: 0, baseDelayMs: 1, maxDelayMs: 4, maxRetryAfterMs: 1000 },
};

type Wire = { role: string; content?: string | null; tool_call_id?: string; tool_calls?: { id: string }[] };

describe('whole replies from an OpenAI-compatible server, through the runtime', () => {
  let server: FakeOpenAiServer;
  let rt: TestRuntime;
  const temp = useTempStore('rl-openai-replies-', () => rt?.close());
  beforeEach(async () => (server = await startFakeOpenAiServer()));
  afterEach(() => server.close());

  const backend = () =>
    new OpenAiBackend({ baseURL: server.baseURL, apiKey: 'k', models: { orchestrator: 'm' }, stream: false });

  const run = async (input: string) => {
    rt = await startTestRuntime({
      store: temp.store,
      tools: testToolRegistry(temp.dir),
      permissions: new AllowAllPolicy(),
      model: backend(),
      discipline: settings,
      rng: seededRandom(3),
    });
    const { task_id } = await rt.runtime.submit({ input }, { source: 'cli' });
    const progress = await rt.runtime.settled(task_id);
    await rt.close();
    return { task_id, progress, events: await temp.store.readWholeStream(task_id) };
  };
  const chats = () => server.requests.filter((r) => r.path === '/v1/chat/completions');
  const guards = (events: RuntimeEvent[], guard: string) =>
    events.flatMap((e) => (e.type === 'GUARD_TRIGGERED' && e.payload.guard === guard ? [e.payload] : []));
  const replayed = async (taskId: string) =>
    (
      await replayTask(
        {
          store: temp.store,
          tools: testToolRegistry(temp.dir),
          discipline: settings,
          rng: seededRandom(3),
          logger: new RecordingRuntimeLogger(),
        },
        taskId,
      )
    ).events;

  it('a reply our own event check refuses is a validation_error: asked once, not retried, not a provider_error', async () => {
    server.enqueue({ tool_calls: [{ id: 'c1', name: '', arguments: '{}' }] });
    const { task_id, progress, events } = await run('write me a poem');
    expect(chats()).toHaveLength(1);
    const responded = events.filter((e) => e.type === 'MODEL_RESPONDED');
    expect(responded[0].payload).toMatchObject({
      error: {
        kind: 'validation_error',
        message: expect.stringMatching(/cannot be recorded.*tool_calls\.0\.name/),
      },
    });
    expect(guards(events, 'retry')).toEqual([]);
    // sys_util, asked in its place, does not understand the input: the task ends with the reply's failure
    expect(progress.final).toMatchObject({ stop_reason: 'validation_error' });
    expect(replayView(await replayed(task_id))).toEqual(replayView(events));
  });

  it('two calls sharing one id: the correction turn is sent, each call with an id of its own, and the calls made again run', async () => {
    server.enqueue(
      {
        tool_calls: [
          { id: 'c1', name: 'echo', arguments: '{"text":"a"}' },
          { id: 'c1', name: 'echo', arguments: '{"text":"b"}' },
        ],
      },
      {
        tool_calls: [
          { id: 'c2', name: 'echo', arguments: '{"text":"a"}' },
          { id: 'c3', name: 'echo', arguments: '{"text":"b"}' },
        ],
      },
      { content: 'echoed a and b' },
    );
    const { task_id, progress, events } = await run('echo a and b');
    expect(progress.final).toMatchObject({ stop_reason: 'completed', result: 'echoed a and b' });
    expect(chats()).toHaveLength(3);
    const correction = (chats()[1].body.messages as Wire[]).slice(-3);
    expect(correction.map((m) => [m.role, m.tool_call_id ?? m.tool_calls?.map((c) => c.id)])).toEqual([
      ['assistant', ['c1', 'c1_2']],
      ['tool', 'c1'],
      ['tool', 'c1_2'],
    ]);
    expect(correction[2].content).toMatch(/had the id c1 of an earlier call.*each with an id of its own/);
    expect(guards(events, 'correction').map((g) => g.detail)).toEqual([
      'tool call id c1 is given to 2 calls of one reply; each call needs an id of its own',
    ]);
    expect(events.filter((e) => e.type === 'TOOL_COMPLETED')).toHaveLength(2);
    expect(replayView(await replayed(task_id))).toEqual(replayView(events));
  });

  it('a text answer cut off at the token limit (finish_reason length) is not the answer: the model is asked again in full', async () => {
    server.enqueue(
      { content: 'The three laws are: one, a robot may', finish_reason: 'length' },
      { content: 'Three laws, in short: no harm, obey, survive.' },
    );
    const { task_id, progress, events } = await run('list the three laws');
    expect(progress.final).toMatchObject({
      stop_reason: 'completed',
      result: 'Three laws, in short: no harm, obey, survive.',
    });
    const first = events.find((e) => e.type === 'MODEL_RESPONDED');
    expect(first?.payload).toMatchObject({ finish_reason: 'length', error: null });
    expect(guards(events, 'correction').map((g) => g.detail)).toEqual([expect.stringContaining('cut off')]);
    const asked = chats()[1].body.messages as Wire[];
    expect(asked[asked.length - 1]).toMatchObject({
      role: 'user',
      content: expect.stringContaining('cut off'),
    });
    expect(replayView(await replayed(task_id))).toEqual(replayView(events));
  });

  it('cut off every time: the task never completes with a cut-off text', async () => {
    server.setDefault({ content: 'The answer begins', finish_reason: 'length' });
    const { progress } = await run('write me a poem');
    expect(progress.final).toMatchObject({ stop_reason: 'validation_error' });
    expect(progress.final?.detail).toContain('cut off');
    expect(progress.final?.result ?? null).not.toBe('The answer begins');
  });
});
