import { RuntimeEvent, emptyUsage } from '@runledger/contracts';
import { ModelBackend, sleep } from '../model/model-backend';
import { RuntimeParts } from '../runtime-options';
import {
  AllowAllPolicy,
  TaskRoutedBackend,
  TestRuntime,
  startTestRuntime,
  testToolRegistry,
} from '../testing';
import { useTempStore } from '../testing/temp-store';
import { DEFAULT_DISCIPLINE_SETTINGS } from '../discipline/settings';
import { replayDivergence } from '../replay/replay-view';
import { replayTask } from '../runtime.module';
import { RecordingRuntimeLogger } from '../testing';
import { childTaskIdFor } from './delegation-runner';
import { carveBudgets } from './carve-budgets';

const json = (v: unknown): string => JSON.stringify(v);
const agentStep = (id: string, input: string, extra: Record<string, unknown> = {}) => ({
  id,
  kind: 'agent',
  args: { agent: 'coder', input, ...extra },
});

describe('delegation', () => {
  const temp = useTempStore('rl-deleg-', () => rt?.close());
  let rt: TestRuntime;

  const build = async (model: ModelBackend, extra: Partial<RuntimeParts> = {}) => {
    rt = await startTestRuntime({
      store: temp.store,
      tools: testToolRegistry(temp.dir),
      permissions: new AllowAllPolicy(),
      model,
      ...extra,
    });
    return rt.runtime;
  };
  const log = (taskId: string): Promise<RuntimeEvent[]> => temp.store.readWholeStream(taskId);
  const ofType = <T extends RuntimeEvent['type']>(events: RuntimeEvent[], type: T) =>
    events.filter((e): e is Extract<RuntimeEvent, { type: T }> => e.type === type);

  it('two agent steps of one plan run as concurrent child tasks whose results are the steps outputs in the parent', async () => {
    let running = 0;
    let overlapped = false;
    const model = new TaskRoutedBackend(async (task, prompt) => {
      if (task.startsWith('child')) {
        running++;
        if (running > 1) overlapped = true;
        await sleep(50);
        running--;
        return json({ type: 'respond', content: `result of ${task}` });
      }
      if (!prompt.includes('step a completed'))
        return json({ type: 'plan', steps: [agentStep('a', 'child one'), agentStep('b', 'child two')] });
      return json({ type: 'respond', content: 'both done' });
    });
    const runtime = await build(model);
    const { task_id } = await runtime.submit({ input: 'split the work' }, { source: 'cli' });
    const progress = await runtime.settled(task_id);
    expect(progress.final).toMatchObject({ stop_reason: 'completed', result: 'both done' });

    const events = await log(task_id);
    const started = ofType(events, 'CHILD_TASK_STARTED');
    const ended = ofType(events, 'CHILD_TASK_ENDED');
    expect(started.map((e) => e.payload)).toEqual([
      expect.objectContaining({ step_id: 'a', call_id: 'call_1_a', agent: 'coder', depth: 1 }),
      expect.objectContaining({ step_id: 'b', call_id: 'call_1_b', agent: 'coder', depth: 1 }),
    ]);
    expect(started[0].payload.child_task_id).toBe(childTaskIdFor(task_id, 'call_1_a'));
    expect(ended.map((e) => [e.payload.step_id, e.payload.status, e.payload.result]).sort()).toEqual([
      ['a', 'completed', 'result of child one'],
      ['b', 'completed', 'result of child two'],
    ]);
    expect(overlapped).toBe(true);

    // each child: its own stream, naming its parent, root, depth and agent
    for (const s of started) {
      const child = await log(s.payload.child_task_id);
      expect(child[0]).toMatchObject({
        type: 'TASK_RECEIVED',
        payload: { parent_task_id: task_id, root_task_id: task_id, depth: 1, source: 'delegation' },
      });
      expect(child[0].type === 'TASK_RECEIVED' && child[0].payload.agent?.name).toBe('coder');
      expect(child[child.length - 1].type).toBe('TASK_COMPLETED');
    }

    // the parent's second round was shown both results, and the children's usage rolled up into its own
    const lastParentPrompt = model.requests
      .map((r) => r.messages.map((m) => m.content).join('\n'))
      .filter((p) => p.includes('## Task\nsplit the work'))
      .pop()!;
    expect(lastParentPrompt).toContain('step a completed: result of child one');
    expect(lastParentPrompt).toContain('step b completed: result of child two');
    expect(progress.usage.model_calls).toBe(4);
    expect(progress.usage.total_tokens).toBe(60);
  });

  it('a delegate directive runs as a plan of one agent step; the child is told it works as the agent', async () => {
    const model = new TaskRoutedBackend((task, prompt) => {
      if (task === 'write the file') return json({ type: 'respond', content: 'written' });
      if (!prompt.includes('step delegate completed'))
        return json({ type: 'delegate', agent: 'coder', input: 'write the file' });
      return json({ type: 'respond', content: 'the coder wrote it' });
    });
    const runtime = await build(model);
    const { task_id } = await runtime.submit({ input: 'get it written' }, { source: 'cli' });
    expect((await runtime.settled(task_id)).final).toMatchObject({ result: 'the coder wrote it' });
    const events = await log(task_id);
    expect(ofType(events, 'PLAN_STARTED')[0].payload.steps).toEqual([
      expect.objectContaining({
        id: 'delegate',
        kind: 'agent',
        args: { agent: 'coder', input: 'write the file' },
      }),
    ]);
    const childPrompt = model.requests.find((r) =>
      r.messages.some((m) => m.content.includes('## Task\nwrite the file')),
    )!;
    expect(childPrompt.messages[0].content).toContain('You work as the coder agent');
    // the orchestrator is offered the agents
    expect(model.requests[0].messages[0].content).toContain('"type":"delegate"');
    expect(model.requests[0].messages[0].content).toContain('- coder: ');
  });

  it('an unknown agent, or one delegation too deep, fails the step with a clear error and starts no child', async () => {
    const model = new TaskRoutedBackend((task, prompt) => {
      if (task === 'nested') return json({ type: 'delegate', agent: 'coder', input: 'too deep' });
      if (task === 'too deep') return json({ type: 'respond', content: 'never' });
      if (prompt.includes('step delegate failed') || prompt.includes('step x failed'))
        return json({ type: 'respond', content: 'gave up' });
      if (prompt.includes('step delegate completed')) return json({ type: 'respond', content: 'done' });
      if (task === 'unknown')
        return json({
          type: 'plan',
          steps: [{ ...agentStep('x', 'y'), args: { agent: 'nobody', input: 'y' } }],
        });
      return json({ type: 'delegate', agent: 'coder', input: 'nested' });
    });
    const runtime = await build(model, { maxDelegationDepth: 1 });

    const unknown = await runtime.submit({ input: 'unknown' }, { source: 'cli' });
    await runtime.settled(unknown.task_id);
    const unknownLog = await log(unknown.task_id);
    expect(ofType(unknownLog, 'CHILD_TASK_STARTED')).toHaveLength(0);
    expect(ofType(unknownLog, 'STEP_FAILED')[0].payload.error).toBe(
      'unknown agent nobody; the agents are: coder',
    );

    const deep = await runtime.submit({ input: 'root' }, { source: 'cli' });
    await runtime.settled(deep.task_id);
    const child = ofType(await log(deep.task_id), 'CHILD_TASK_STARTED')[0].payload.child_task_id;
    const childLog = await log(child);
    expect(ofType(childLog, 'CHILD_TASK_STARTED')).toHaveLength(0);
    expect(ofType(childLog, 'STEP_FAILED')[0].payload.error).toMatch(
      /^delegation depth limit reached: task \S+ is 1 delegation\(s\) down and the limit is 1$/,
    );
  });

  it('a replay of a parent that delegated matches its recording: each child ends as recorded, none runs', async () => {
    const model = new TaskRoutedBackend((task, prompt) => {
      if (task.startsWith('child')) return json({ type: 'respond', content: `did ${task}` });
      if (!prompt.includes('step b completed'))
        return json({
          type: 'plan',
          steps: [agentStep('a', 'child a', { budgets: { max_tokens: 5000 } }), agentStep('b', 'child b')],
        });
      return json({ type: 'respond', content: 'all done' });
    });
    const runtime = await build(model, { discipline: DEFAULT_DISCIPLINE_SETTINGS });
    const { task_id } = await runtime.submit({ input: 'delegate and replay' }, { source: 'cli' });
    expect((await runtime.settled(task_id)).final).toMatchObject({ result: 'all done' });
    const calls = model.requests.length;
    const taskCount = async () => (await temp.store.readAll({ types: ['TASK_RECEIVED'] })).length;
    const tasksBefore = await taskCount();

    const replay = await replayTask(
      {
        store: temp.store,
        tools: testToolRegistry(temp.dir),
        discipline: DEFAULT_DISCIPLINE_SETTINGS,
        logger: new RecordingRuntimeLogger(),
      },
      task_id,
    );
    expect(replayDivergence(await log(task_id), replay.events)).toBeNull();
    expect(replay.progress.final).toMatchObject({ result: 'all done' });
    expect(model.requests).toHaveLength(calls);
    expect(await taskCount()).toBe(tasksBefore);
  });

  it('a configured agent is shown only its tools, may call no other, and asks its own model for a role', async () => {
    const model = new TaskRoutedBackend((task, prompt) => {
      if (task === 'look around') {
        if (!prompt.includes('Round 1')) return json({ type: 'tool', tool: 'echo', args: { text: 'hi' } });
        return json({ type: 'respond', content: 'could not' });
      }
      if (!prompt.includes('step delegate'))
        return json({ type: 'delegate', agent: 'reader', input: 'look around' });
      return json({ type: 'respond', content: 'done' });
    });
    const reader = {
      name: 'reader',
      description: 'reads files',
      models: { orchestrator: 'reader-model' },
      tools: ['file_read'],
      instructions: 'Only read.',
    };
    const runtime = await build(model, { agents: [reader] });
    const { task_id } = await runtime.submit({ input: 'have it read' }, { source: 'cli' });
    await runtime.settled(task_id);
    const childId = childTaskIdFor(task_id, 'call_1_delegate');
    const childLog = await log(childId);
    expect(ofType(childLog, 'TOOL_FAILED')[0].payload).toMatchObject({
      tool: 'echo',
      error_kind: 'validation_error',
      error: 'the reader agent may not use echo (its tools: file_read)',
    });
    expect(ofType(childLog, 'MODEL_CALLED').map((e) => e.payload.model)).toEqual([
      'reader-model',
      'reader-model',
    ]);
    const childPrompt = model.requests.find((r) =>
      r.messages.some((m) => m.content.includes('## Task\nlook around')),
    )!;
    expect(childPrompt.messages[0].content).toContain(
      'You work as the reader agent, on a task another agent gave you.\nOnly read.',
    );
    expect(childPrompt.messages[0].content).not.toContain('- echo:');
    expect(childPrompt.messages[0].content).toContain('- file_read:');
    // the parent was offered both agents
    expect(model.requests[0].messages[0].content).toContain('- reader: reads files');
  });

  it('cancelling a parent cancels the child it waits for', async () => {
    const model = new TaskRoutedBackend(async (task, _prompt, signal) => {
      if (task === 'slow child') {
        await sleep(60_000, signal);
        return json({ type: 'respond', content: 'late' });
      }
      return json({ type: 'delegate', agent: 'coder', input: 'slow child' });
    });
    const runtime = await build(model);
    const { task_id } = await runtime.submit({ input: 'parent' }, { source: 'cli' });
    const childId = childTaskIdFor(task_id, 'call_1_delegate');
    for (let i = 0; i < 200 && !(await log(childId)).some((e) => e.type === 'MODEL_CALLED'); i++)
      await sleep(10);
    await runtime.cancel(task_id);
    expect((await runtime.progress(task_id)).status).toBe('cancelled');
    expect((await runtime.progress(childId)).final).toMatchObject({ stop_reason: 'cancelled' });
  });
});

describe('carveBudgets', () => {
  const parent = {
    max_rounds: 10,
    max_tool_calls: 20,
    max_model_calls: 30,
    max_failures: 5,
    max_tokens: 1000,
    max_cost_usd: 1,
    timeout_ms: 60_000,
  };
  const used = { ...emptyUsage(), total_tokens: 300, tool_calls: 5, cost_usd: 0.25 };

  it('gives a child at most what the parent has left after its spending and its running children', () => {
    expect(carveBudgets(undefined, parent, used, 10_000, [{ max_tokens: 200, max_tool_calls: 5 }])).toEqual({
      ok: true,
      budgets: { max_tokens: 500, max_cost_usd: 0.75, max_tool_calls: 10, timeout_ms: 50_000 },
    });
    expect(carveBudgets({ max_tokens: 100, max_rounds: 3 }, parent, used, 0, [])).toEqual({
      ok: true,
      budgets: { max_tokens: 100, max_rounds: 3, max_cost_usd: 0.75, max_tool_calls: 15, timeout_ms: 60_000 },
    });
  });

  it('refuses when nothing is left of a budget the child cannot run without; no limits, no carving', () => {
    expect(carveBudgets(undefined, parent, { ...used, total_tokens: 1000 }, 0, [])).toEqual({
      ok: false,
      error: 'no max_tokens left to delegate with (limit 1000, spent 1000, given to running children 0)',
    });
    expect(carveBudgets({ max_tokens: 5 }, null, used, 0, [])).toEqual({
      ok: true,
      budgets: { max_tokens: 5 },
    });
  });
});
