import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InMemoryEventStore } from '@runledger/event-store';
import { createRuntime } from './create-runtime';
import { ModelBackend } from './model/model-backend';
import { ScriptedBackend } from './model/scripted-backend';
import { SysUtilBackend } from './model/sys-util';
import { replayTask, replayView } from './replay';
import { RuleTablePolicy, testToolRegistry } from './testing';

describe('replayTask', () => {
  let dir: string;
  let store: InMemoryEventStore;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'rl-replay-'));
    store = new InMemoryEventStore();
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  async function record(model: ModelBackend, input: string, policy = new RuleTablePolicy({})) {
    const rt = createRuntime({
      store,
      tools: testToolRegistry(dir),
      permissions: policy,
      model,
      log: () => undefined,
    });
    const { task_id } = await rt.service.submit({ input }, { source: 'cli' });
    await rt.service.settled(task_id);
    await rt.service.close();
    return task_id;
  }

  async function expectSameRun(taskId: string) {
    // Replaying must not touch the workspace: remove what the original run wrote.
    rmSync(dir, { recursive: true, force: true });
    const { task_id } = await replayTask(
      { store, tools: testToolRegistry(dir), log: () => undefined },
      taskId,
    );
    const original = await store.readWholeStream(taskId);
    const replayed = await store.readWholeStream(task_id);
    expect(replayView(replayed)).toEqual(replayView(original));
    return replayed;
  }

  it('a sys_util plan replays event for event without running a tool', async () => {
    writeFileSync(join(dir, 'in.txt'), 'recorded content');
    const id = await record(new SysUtilBackend(), 'run echo hi then read in.txt');
    const replayed = await expectSameRun(id);
    expect(replayed[replayed.length - 1]).toMatchObject({
      type: 'TASK_COMPLETED',
      payload: { result: expect.stringContaining('recorded content') },
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

  it('a provider error that fell back to sys_util replays the same fallback', async () => {
    const model = new ScriptedBackend({
      orchestrator: [{ error: 'provider_error' }, '{"type":"respond","content":"fine"}'],
    });
    const id = await record(model, 'run echo fallback');
    const replayed = await expectSameRun(id);
    expect(replayed.find((e) => e.type === 'ROUTER_DECIDED')?.payload).toMatchObject({ source: 'sys_util' });
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
});
