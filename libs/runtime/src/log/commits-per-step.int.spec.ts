import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RuntimeEvent } from '@runledger/contracts';
import { HeuristicCritic } from '@runledger/critic';
import { createCriticMemoryHook, createMemoryEndGuard } from '@runledger/memory';
import { ScriptedBackend } from '../model/scripted-backend';
import { RuleTablePolicy, SEVEN_STEP_PLAN, manifestOf, startTestRuntime, testToolRegistry } from '../testing';
import { SqliteWithMemory, openSqliteWithMemory } from '../testing/sqlite-memory';

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

  async function runSevenSteps(withCriticAndMemory: boolean, plan = SEVEN_STEP_PLAN) {
    const { store, memory } = opened;
    const rt = await startTestRuntime({
      store,
      tools: testToolRegistry(dir)
        .add(
          manifestOf('shout', {
            args_schema: { type: 'object', properties: { text: { type: 'string' } } },
            read_only: true,
            idempotent: true,
          }),
          async (args) => String(args.text).toUpperCase(),
        )
        .add(manifestOf('scribble', { read_only: true, idempotent: true }), async (args) => {
          // changes what it was given (in place): the intent stored after it ran must not show it
          (args.note as { text: string }).text = 'scribbled over';
          return 'done';
        }),
      permissions: new RuleTablePolicy({}),
      model: new ScriptedBackend({ orchestrator: [plan, '{"type":"respond","content":"done"}'] }),
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
    ['critic and memory off', false, ['TOOL_COMPLETED', 'STEP_COMPLETED']],
    ['critic and memory on', true, ['TOOL_COMPLETED', 'CRITIC_RESULT', 'MEMORY_WRITTEN', 'STEP_COMPLETED']],
  ])('a 7-step task, %s: one commit per tool step', async (_label, on, outcome) => {
    const { settled, events, groups, commits } = await runSevenSteps(on as boolean);
    expect(settled.final?.stop_reason).toBe('completed');
    expect(commits).toBe(groups.length);
    const intents = groups.filter((g) => g.includes('TOOL_CALLED'));
    // each intent is durable before its tool runs, in a commit of its own step's start and what led to it:
    // the model's reply and the router's decision for the first, the previous step's whole outcome after that
    expect(intents).toEqual([
      ['MODEL_RESPONDED', 'ROUTER_DECIDED', 'PLAN_STARTED', 'STEP_STARTED', 'TOOL_CALLED'],
      ...Array.from({ length: 6 }, () => [...(outcome as string[]), 'STEP_STARTED', 'TOOL_CALLED']),
    ]);
    // the last outcome and the plan's end ride with the next round's model call
    const nextCall = groups[groups.indexOf(intents[6]) + 1];
    expect(nextCall).toEqual([...(outcome as string[]), 'PLAN_COMPLETED', 'CONTEXT_BUILT', 'MODEL_CALLED']);
    expect(events.filter((e) => e.type === 'TOOL_CALLED')).toHaveLength(7);
    // the hooks scored the outcome under the id it was then stored with
    const outcomes = events.filter((e) => e.type === 'TOOL_COMPLETED').map((e) => e.event_id);
    const scored = events.flatMap((e) => (e.type === 'CRITIC_RESULT' ? [e.payload.target_event_id] : []));
    expect(scored).toEqual(on ? outcomes : []);
    // one commit per event before group commit and step batching (41 and 57 events), 25 with two per step
    expect(commits).toBe(11);
    // the answer's streamed chunk and what the memory end guard records commit with the reply that ended the task and the final event
    const last = groups[groups.length - 1];
    expect(last.slice(0, 3)).toEqual(['OUTPUT_CHUNK', 'MODEL_RESPONDED', 'ROUTER_DECIDED']);
    expect(last[last.length - 1]).toBe('TASK_COMPLETED');
    expect(last.slice(3, -1).every((t) => t === 'MEMORY_WRITTEN')).toBe(true);
    expect(last.length > 4).toBe(on);
  });

  it.each([
    ['critic and memory off', false, ['TOOL_COMPLETED', 'STEP_COMPLETED']],
    ['critic and memory on', true, ['TOOL_COMPLETED', 'CRITIC_RESULT', 'MEMORY_WRITTEN', 'STEP_COMPLETED']],
  ])(
    'a 7-step task of a read-only tool, %s: the steps ride with the next model call',
    async (_label, on, outcome) => {
      const { settled, events, groups, commits } = await runSevenSteps(
        on as boolean,
        // every step the same output: a memory write must find the one before it, not committed yet
        SEVEN_STEP_PLAN.replaceAll('"echo"', '"shout"').replace(/step \d/g, 'the same step'),
      );
      expect(settled.final?.stop_reason).toBe('completed');
      expect(events.filter((e) => e.type === 'TOOL_COMPLETED')).toHaveLength(7);
      // no intent commits on its own: the plan's seven steps, intents and outcomes in order, go with the next call
      const withIntents = groups.filter((g) => g.includes('TOOL_CALLED'));
      expect(withIntents).toHaveLength(1);
      // (a step's memory write is checked below: once an entry's weight is full, a repeat writes nothing)
      const step = ['STEP_STARTED', 'TOOL_CALLED', ...(outcome as string[])].filter(
        (t) => t !== 'MEMORY_WRITTEN',
      );
      expect(withIntents[0].filter((t) => t !== 'MEMORY_WRITTEN')).toEqual([
        'MODEL_RESPONDED',
        'ROUTER_DECIDED',
        'PLAN_STARTED',
        ...Array.from({ length: 7 }, () => step).flat(),
        'PLAN_COMPLETED',
        'CONTEXT_BUILT',
        'MODEL_CALLED',
      ]);
      // received, the two model calls, the end with the answer's streamed chunk (11 when every intent commits first)
      expect(commits).toBe(4);
      if (on) {
        const writes = events.flatMap((e) => (e.type === 'MEMORY_WRITTEN' ? [e.payload] : []));
        const steps = writes.filter((w) => w.kind === 'tool_result');
        expect(steps[0].op).toBe('insert');
        expect(steps.length).toBeGreaterThan(1);
        expect(steps.slice(1).every((w) => w.op === 'reinforce' && w.entry_id === steps[0].entry_id)).toBe(
          true,
        );
      }
    },
  );

  it('a 7-step task of the built-in file_read (its manifest does not say read_only): read-only as the round policy counts it, its steps ride with the next model call', async () => {
    writeFileSync(join(dir, 'twelve.txt'), 'twelve bytes');
    const plan = SEVEN_STEP_PLAN.replaceAll('"echo"', '"file_read"').replace(
      /"args":\{"text":"step \d"\}/g,
      '"args":{"path":"twelve.txt"}',
    );
    const { settled, events, groups, commits } = await runSevenSteps(false, plan);
    expect(settled.final?.stop_reason).toBe('completed');
    const outcomes = events.filter((e) => e.type === 'TOOL_COMPLETED');
    expect(outcomes.map((e) => e.type === 'TOOL_COMPLETED' && e.payload.result.output)).toEqual(
      Array.from({ length: 7 }, () => 'twelve bytes'),
    );
    expect(groups.filter((g) => g.includes('TOOL_CALLED'))).toHaveLength(1);
    expect(commits).toBe(4);
  });

  it('a read-only tool that changes its args in place: the intent stored after it ran holds the args it was given', async () => {
    const plan = JSON.stringify({
      type: 'plan',
      steps: [
        { id: 's0', kind: 'tool', tool: 'scribble', args: { note: { text: 'as given' } }, depends_on: [] },
      ],
    });
    const { settled, events } = await runSevenSteps(false, plan);
    expect(settled.final?.stop_reason).toBe('completed');
    const intent = events.find((e) => e.type === 'TOOL_CALLED');
    expect(intent?.payload).toMatchObject({ tool: 'scribble', args: { note: { text: 'as given' } } });
  });
});
