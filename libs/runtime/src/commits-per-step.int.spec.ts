import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RuntimeEvent } from '@runledger/contracts';
import { HeuristicCritic } from '@runledger/critic';
import { createCriticMemoryHook, createMemoryEndGuard } from '@runledger/memory';
import { ScriptedBackend } from './model/scripted-backend';
import { RuleTablePolicy, SEVEN_STEP_PLAN, startTestRuntime, testToolRegistry } from './testing';
import { SqliteWithMemory, openSqliteWithMemory } from './testing/sqlite-memory';

describe('commits per step (SQLite log, group commit)', () => {
  let dir: string;
  let opened: SqliteWithMemory;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rl-commits-'));
    opened = await openSqliteWithMemory(dir);
  });
  afterEach(async () => {
    await opened.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function runSevenSteps(withCriticAndMemory: boolean) {
    const { store, memory } = opened;
    const rt = await startTestRuntime({
      store,
      tools: testToolRegistry(dir),
      permissions: new RuleTablePolicy({}),
      model: new ScriptedBackend({ orchestrator: [SEVEN_STEP_PLAN, '{"type":"respond","content":"done"}'] }),
      hooks: withCriticAndMemory ? [createCriticMemoryHook({ critic: new HeuristicCritic(), memory })] : [],
      guards: withCriticAndMemory ? [createMemoryEndGuard(memory)] : [],
    });
    // one task alone on the store: every commit is one of its appends, heard as one listener call
    const groups: string[][] = [];
    const detach = store.onCommitted((events) => groups.push(events.map((e) => e.type)));
    const before = store.commitStats();
    const { task_id } = await rt.runtime.submit({ input: 'seven steps' }, { source: 'cli' });
    const settled = await rt.runtime.settled(task_id);
    await rt.close();
    detach();
    const events: RuntimeEvent[] = await store.readWholeStream(task_id);
    return { settled, events, groups, commits: store.commitStats().commits - before.commits };
  }

  it.each([
    ['critic and memory off', false, ['TOOL_COMPLETED', 'STEP_COMPLETED'], 25],
    [
      'critic and memory on',
      true,
      ['TOOL_COMPLETED', 'CRITIC_RESULT', 'MEMORY_WRITTEN', 'STEP_COMPLETED'],
      25,
    ],
  ])('a 7-step task, %s: two commits per tool step', async (_label, on, outcome, total) => {
    const { settled, events, groups, commits } = await runSevenSteps(on as boolean);
    expect(settled.final?.stop_reason).toBe('completed');
    expect(commits).toBe(groups.length);
    const stepGroups = groups.filter((g) => g.some((t) => t.startsWith('STEP_') || t.startsWith('TOOL_')));
    // the intent is durable before the tool runs; everything the outcome led to commits at once
    expect(stepGroups).toEqual(
      Array.from({ length: 7 }, () => [['STEP_STARTED', 'TOOL_CALLED'], outcome]).flat(),
    );
    expect(events.filter((e) => e.type === 'TOOL_CALLED')).toHaveLength(7);
    // the hooks scored the outcome under the id it was then stored with
    const outcomes = events.filter((e) => e.type === 'TOOL_COMPLETED').map((e) => e.event_id);
    const scored = events.flatMap((e) => (e.type === 'CRITIC_RESULT' ? [e.payload.target_event_id] : []));
    expect(scored).toEqual(on ? outcomes : []);
    // before group commit and step batching: one commit per event (41 and 57 events)
    expect(commits).toBe(total);
    // a round's context commits with the router's first event, never alone
    const contexts = groups.filter((g) => g.includes('CONTEXT_BUILT'));
    expect(contexts).toHaveLength(2);
    for (const g of contexts) expect(g.slice(0, 2)).toEqual(['CONTEXT_BUILT', 'MODEL_CALLED']);
    // what the memory end guard records commits with the final event
    const last = groups[groups.length - 1];
    expect(last[last.length - 1]).toBe('TASK_COMPLETED');
    expect(last.slice(0, -1).every((t) => t === 'MEMORY_WRITTEN')).toBe(true);
    expect(last.length > 1).toBe(on);
  });
});
