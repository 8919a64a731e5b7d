import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RuntimeEvent } from '@runledger/contracts';
import { Critic, CriticModel, HeuristicCritic, ModelCritic } from '@runledger/critic';
import { SqliteEventStore } from '@runledger/event-store';
import { MemoryService, createCriticMemoryHook, createMemoryEndGuard } from '@runledger/memory';
import { ModelBackend } from '../model/model-backend';
import { ScriptedBackend } from '../model/scripted-backend';
import { replayTask } from '../runtime.module';
import { replayView } from './replay-view';
import { RecordingRuntimeLogger, RuleTablePolicy, startTestRuntime, testToolRegistry } from '../testing';
import { SqliteWithMemory, openSqliteWithMemory } from '../testing/sqlite-memory';

/**
 * A run scored by a critic, wired as the controller wires it (critic + memory
 * write policy as the outcome hook, the memory end guard), on a real SQLite log
 * and memory, then replayed with the same guards the controller hands replayTask.
 */
describe('replay of a run with a critic (SQLite log and memory)', () => {
  let dir: string;
  let opened: SqliteWithMemory;
  let store: SqliteEventStore;
  let memory: MemoryService;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rl-replay-critic-'));
    opened = await openSqliteWithMemory(dir);
    ({ store, memory } = opened);
    writeFileSync(join(dir, 'notes.txt'), 'the build uses swc and jest');
  });
  afterEach(async () => {
    await opened.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const tool = (name: string, args: Record<string, unknown>) =>
    JSON.stringify({ type: 'tool', tool: name, args });
  const score = (weight: number) =>
    JSON.stringify({ correctness: 0.9, usefulness: 0.8, safety: 1, memory_store: true, weight, notes: 'ok' });

  /** The critic role of `model`, as the composition adapts it, counting the calls that reach the model. */
  function criticOf(model: ModelBackend, calls: { n: number }): CriticModel {
    return {
      model: model.modelFor('critic') ?? 'none',
      backend: model.backend,
      async complete(messages, { timeout_ms, signal }) {
        calls.n++;
        const res = await model.complete({ role: 'critic', messages, timeout_ms, signal });
        return { content: res.content, usage: res.usage };
      },
    };
  }

  async function record(model: ModelBackend, critic: Critic | null, input = 'read my notes') {
    const rt = await startTestRuntime({
      store,
      tools: testToolRegistry(dir),
      permissions: new RuleTablePolicy({}),
      model,
      hooks: critic ? [createCriticMemoryHook({ critic, memory })] : [],
      guards: [createMemoryEndGuard(memory)],
    });
    const { task_id } = await rt.runtime.submit({ input }, { source: 'cli' });
    await rt.runtime.settled(task_id);
    await rt.close();
    return task_id;
  }

  /** Replays as the controller does: its guards (the memory end guard among them) are passed on. */
  async function replay(taskId: string) {
    const { events } = await replayTask(
      {
        store,
        tools: testToolRegistry(dir),
        guards: [createMemoryEndGuard(memory)],
        logger: new RecordingRuntimeLogger(),
      },
      taskId,
    );
    return { original: await store.readWholeStream(taskId), replayed: events };
  }

  const memoryState = async () =>
    (await memory.list({}, 100)).map((e) => ({ id: e.id, weight: e.weight, updated_at: e.updated_at }));
  const usageOf = (events: RuntimeEvent[]) => {
    const last = events[events.length - 1];
    return last.type === 'TASK_COMPLETED' || last.type === 'TASK_FAILED' ? last.payload.usage : null;
  };
  const types = (events: RuntimeEvent[], type: RuntimeEvent['type']) => events.filter((e) => e.type === type);

  it('a scripted model critic replays with no divergence, no model call and no memory write', async () => {
    const model = new ScriptedBackend({
      orchestrator: [
        tool('file_read', { path: 'notes.txt' }),
        tool('file_read', { path: 'missing.txt' }),
        tool('echo', { text: 'done reading' }),
        tool('echo', { text: 'and again' }),
        tool('file_read', { path: 'notes.txt' }),
        '{"type":"respond","content":"read"}',
      ],
      critic: [
        { content: score(0.9), usage: { prompt_tokens: 120, completion_tokens: 30 } },
        'not JSON at all',
        { error: 'timeout', message: 'critic upstream timed out' },
        { error: 'rate_limited', message: 'slow down' },
        { content: '```json\n' + score(0.95) + '\n```', usage: { prompt_tokens: 90, completion_tokens: 20 } },
      ],
    });
    const calls = { n: 0 };
    const id = await record(model, new ModelCritic(criticOf(model, calls)));
    expect(calls.n).toBe(5);
    const memoryBefore = await memoryState();
    const writesBefore = (await store.readAll({ types: ['MEMORY_WRITTEN'] })).length;
    expect(writesBefore).toBeGreaterThan(0);

    const { original, replayed } = await replay(id);

    expect(replayView(replayed)).toEqual(replayView(original));
    // the critic's part is reproduced and compared, not left out
    expect(replayView(replayed).filter((e) => e.type === 'CRITIC_RESULT')).toHaveLength(5);
    expect(
      types(replayed, 'MODEL_RESPONDED').flatMap((e) =>
        e.type === 'MODEL_RESPONDED' && e.payload.role === 'critic' ? [e.payload.error?.kind ?? 'ok'] : [],
      ),
    ).toEqual(['ok', 'ok', 'timeout', 'rate_limited', 'ok']);
    expect(usageOf(replayed)).toEqual(usageOf(original));
    expect(usageOf(replayed)).toMatchObject({ model_calls: 11 });
    // no model: the critic model was not called again
    expect(calls.n).toBe(5);
    // no memory write: none in the replay, none anywhere, the entries as they were
    expect(types(replayed, 'MEMORY_WRITTEN')).toEqual([]);
    expect((await store.readAll({ types: ['MEMORY_WRITTEN'] })).length).toBe(writesBefore);
    expect(await memoryState()).toEqual(memoryBefore);
  });

  it('a heuristic critic, and no critic at all, replay the same', async () => {
    const script = () =>
      new ScriptedBackend({
        orchestrator: [
          tool('file_read', { path: 'notes.txt' }),
          tool('file_read', { path: 'missing.txt' }),
          '{"type":"respond","content":"read"}',
        ],
      });
    for (const critic of [new HeuristicCritic(), null]) {
      const id = await record(script(), critic);
      const { original, replayed } = await replay(id);
      expect(replayView(replayed)).toEqual(replayView(original));
      expect(types(replayed, 'CRITIC_RESULT')).toHaveLength(critic ? 2 : 0);
      expect(types(replayed, 'MEMORY_WRITTEN')).toEqual([]);
    }
  });

  it('an outcome the recording did not score gets no verdict in the replay (a critic hook that failed)', async () => {
    const model = new ScriptedBackend({
      orchestrator: [
        tool('echo', { text: 'one' }),
        tool('echo', { text: 'two' }),
        '{"type":"respond","content":"two echoes"}',
      ],
      critic: [score(0.5), score(0.6)],
    });
    const calls = { n: 0 };
    const live = new ModelCritic(criticOf(model, calls));
    let outcomes = 0;
    // the first outcome's hook throws (say the embedder was down): nothing of it is recorded
    const flaky: Critic = {
      kind: 'model',
      evaluate: async (input) => {
        if (outcomes++ === 0) throw new Error('embedder down');
        return live.evaluate(input);
      },
    };
    const id = await record(model, flaky);
    const { original, replayed } = await replay(id);
    expect(types(original, 'CRITIC_RESULT')).toHaveLength(1);
    expect(replayView(replayed)).toEqual(replayView(original));
  });

  it('a fork of a run scored by a model critic: the critic scores its new outcomes live, and the fork replays', async () => {
    const script = () =>
      new ScriptedBackend({
        orchestrator: [
          tool('echo', { text: 'one' }),
          tool('echo', { text: 'two' }),
          '{"type":"respond","content":"two echoes"}',
        ],
        critic: [score(0.5), score(0.6)],
      });
    const first = script();
    const id = await record(first, new ModelCritic(criticOf(first, { n: 0 })));
    const original = await store.readWholeStream(id);
    // fork right after the first outcome's critic result: the second tool call is the fork's own
    const cut = original.findIndex((e) => e.type === 'CRITIC_RESULT') + 2;
    const live = script();
    const calls = { n: 0 };
    const rt = await startTestRuntime({
      store,
      tools: testToolRegistry(dir),
      permissions: new RuleTablePolicy({}),
      model: live,
      hooks: [createCriticMemoryHook({ critic: new ModelCritic(criticOf(live, calls)), memory })],
      guards: [createMemoryEndGuard(memory)],
    });
    const { task_id: forkId } = await rt.runtime.fork(id, cut);
    await rt.runtime.settled(forkId);
    await rt.close();
    const fork = await store.readWholeStream(forkId);
    expect(fork[fork.length - 1].type).toBe('TASK_COMPLETED');
    expect(calls.n).toBe(1);
    expect(types(fork, 'CRITIC_RESULT')).toHaveLength(2);

    const { original: recordedFork, replayed } = await replay(forkId);
    expect(replayView(replayed)).toEqual(replayView(recordedFork));
    expect(types(replayed, 'CRITIC_RESULT')).toHaveLength(2);
    expect(calls.n).toBe(1);
  });

  it('a changed critic verdict is a divergence: the comparison sees CRITIC_RESULT', async () => {
    const model = new ScriptedBackend({
      orchestrator: [tool('echo', { text: 'x' }), '{"type":"respond","content":"x"}'],
      critic: [score(0.7)],
    });
    const id = await record(model, new ModelCritic(criticOf(model, { n: 0 })));
    const { original, replayed } = await replay(id);
    const tampered = original.map((e) =>
      e.type === 'CRITIC_RESULT' ? { ...e, payload: { ...e.payload, error: 'tampered' } } : e,
    ) as RuntimeEvent[];
    expect(replayView(replayed)).toEqual(replayView(original));
    expect(replayView(replayed)).not.toEqual(replayView(tampered));
  });
});
