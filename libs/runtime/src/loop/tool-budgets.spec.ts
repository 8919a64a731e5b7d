import { RuntimeEvent, ToolManifest } from '@runledger/contracts';
import { ModelBackend, ModelRequest } from '../model/model-backend';
import { ScriptedBackend } from '../model/scripted-backend';
import { replayTask } from '../runtime.module';
import { replayView } from '../replay/replay-view';
import { RuntimeParts } from '../runtime-options';
import {
  AllowAllPolicy,
  nativeToolCall as native,
  respondDirective as respond,
  toolDirective as tool,
  RecordingRuntimeLogger,
  startTestRuntime,
  TestRuntime,
  testToolRegistry,
  InMemoryToolRegistry,
  manifestOf,
  TaskRoutedBackend,
} from '../testing';
import { useTempStore } from '../testing/temp-store';
import { childTaskIdFor } from '../delegation/delegation-runner';
import { isEmptyOutput, toolBudgetsOf } from './tool-budgets';

describe('per-tool budgets: max_calls_per_task and only_if_previous_empty', () => {
  const temp = useTempStore('rl-toolbudget-', () => rt?.close());
  let rt: TestRuntime;
  let searches: string[];
  const requests: ModelRequest[] = [];

  /** the test tools plus `search`, whose budget is `budget`; a query `none` finds nothing */
  const registry = (budget: Partial<ToolManifest>): InMemoryToolRegistry =>
    testToolRegistry(temp.dir).add(manifestOf('search', { read_only: true, ...budget }), async (a) => {
      searches.push(String(a.query));
      return { hits: a.query === 'none' ? [] : [`a page about ${String(a.query)}`] };
    });

  const start = async (
    model: ModelBackend,
    budget: Partial<ToolManifest>,
    extra: Partial<RuntimeParts> = {},
  ) => {
    searches = [];
    requests.length = 0;
    const complete = model.complete.bind(model);
    model.complete = async (req) => {
      requests.push(req);
      return complete(req);
    };
    rt = await startTestRuntime({
      store: temp.store,
      tools: registry(budget),
      permissions: new AllowAllPolicy(),
      model,
      ...extra,
    });
  };
  const run = async (input: string) => {
    const { task_id } = await rt.runtime.submit({ input }, { source: 'cli' });
    const progress = await rt.runtime.settled(task_id);
    return { task_id, progress, events: await temp.store.readWholeStream(task_id) };
  };
  const ofType = <T extends RuntimeEvent['type']>(events: RuntimeEvent[], type: T) =>
    events.filter((e): e is Extract<RuntimeEvent, { type: T }> => e.type === type);

  it('max_calls_per_task: the call past it is refused unrun, the model is told why, and the tool is no longer offered', async () => {
    await start(
      new ScriptedBackend({
        orchestrator: [
          tool('search', { query: 'cats' }),
          tool('search', { query: 'dogs' }),
          respond('cats: a page about cats'),
        ],
      }),
      { max_calls_per_task: 1 },
    );
    const { progress, events } = await run('find pages about cats');
    expect(events[0]).toMatchObject({
      payload: { settings: { tool_budgets: { search: { max_calls_per_task: 1 } } } },
    });
    expect(searches).toEqual(['cats']);
    const refused = ofType(events, 'TOOL_FAILED');
    expect(refused).toHaveLength(1);
    expect(refused[0].payload).toMatchObject({
      tool: 'search',
      error_kind: 'permission_denied',
      error:
        'over_budget: search may run at most 1 time per task (its manifest) and ran 1: answer from what it returned',
    });
    expect(ofType(events, 'TOOL_CALLED')).toHaveLength(1);
    // offered until its one call ran, then left out of the prompt
    expect(requests[0].messages[0].content).toContain('- search:');
    expect(requests[1].messages[0].content).not.toContain('- search:');
    // the correction is in what the model reads next
    expect(requests[2].messages.map((m) => m.content).join('\n')).toContain(
      'search failed (permission_denied): over_budget: search may run at most 1 time',
    );
    expect(progress.final).toMatchObject({ stop_reason: 'completed', result: 'cats: a page about cats' });
  });

  it('only_if_previous_empty: a second search runs after one that found nothing, not after one that found something; a second refusal ends the task', async () => {
    await start(
      new ScriptedBackend({
        orchestrator: [
          tool('search', { query: 'none' }),
          tool('search', { query: 'cats' }),
          tool('search', { query: 'more cats' }),
          tool('search', { query: 'even more cats' }),
          respond('never asked'),
        ],
      }),
      { only_if_previous_empty: true },
    );
    const { task_id, progress, events } = await run('find pages about cats');
    expect(searches).toEqual(['none', 'cats']);
    expect(ofType(events, 'TOOL_FAILED').map((e) => [e.payload.error_kind, e.payload.error])).toEqual([
      [
        'permission_denied',
        'over_budget: search runs again only when its previous call found nothing (its manifest); call_2 found something: answer from it',
      ],
      ['hard_stop', expect.stringMatching(/^over_budget: search runs again only when/)],
    ]);
    expect(progress.final).toMatchObject({ stop_reason: 'budget_exceeded' });
    expect(requests).toHaveLength(4);
    // the refusals come from the log alone: a replay refuses the same calls and runs no search
    await rt.close();
    searches = [];
    const { events: replayed } = await replayTask(
      {
        store: temp.store,
        tools: registry({ only_if_previous_empty: true }),
        logger: new RecordingRuntimeLogger(),
      },
      task_id,
    );
    expect(replayView(replayed)).toEqual(replayView(events));
    expect(searches).toEqual([]);
  });

  it('native tool calls: a spent tool is not in the request, and a call to it anyway never runs', async () => {
    await start(
      new ScriptedBackend({
        orchestrator: [
          native('c1', 'search', { query: 'cats' }),
          native('c2', 'search', { query: 'dogs' }),
          { content: 'cats: a page about cats' },
        ],
      }),
      { max_calls_per_task: 1 },
    );
    const { progress, events } = await run('find pages about cats');
    expect(requests[0].tools!.map((t) => t.name)).toContain('search');
    expect(requests[1].tools!.map((t) => t.name)).not.toContain('search');
    expect(searches).toEqual(['cats']);
    expect(ofType(events, 'TOOL_FAILED')[0].payload.error).toMatch(/^over_budget: search may run at most 1/);
    expect(progress.final).toMatchObject({ stop_reason: 'completed' });
  });

  it('with the round policy on, the recorded surface leaves the spent tool out', async () => {
    await start(
      new ScriptedBackend({
        orchestrator: [tool('search', { query: 'cats' }), respond('done')],
      }),
      { max_calls_per_task: 1 },
      { roundPolicy: true },
    );
    const { events } = await run('find pages about cats');
    const surfaces = ofType(events, 'CONTEXT_BUILT').map((e) => e.payload.tool_surface?.tools ?? []);
    expect(surfaces[0]).toContain('search');
    expect(surfaces[1]).not.toContain('search');
  });

  it("an agent profile's tool_budgets replaces the manifest's for its tasks", async () => {
    const model = new TaskRoutedBackend((task, prompt) => {
      if (task === 'research cats') {
        const n = (prompt.match(/search (completed|failed)/g) ?? []).length;
        if (n < 2) return tool('search', { query: `cats ${n}` });
        return respond('researched');
      }
      if (!prompt.includes('step delegate'))
        return JSON.stringify({ type: 'delegate', agent: 'researcher', input: 'research cats' });
      return respond('done');
    });
    const researcher = {
      name: 'researcher',
      description: 'searches',
      models: {},
      tools: null,
      instructions: '',
      tool_budgets: { search: { max_calls_per_task: 1 } },
    };
    await start(model, { max_calls_per_task: 5 }, { agents: [researcher] });
    const { task_id, progress } = await run('have cats researched');
    expect(progress.final).toMatchObject({ stop_reason: 'completed' });
    const child = await temp.store.readWholeStream(childTaskIdFor(task_id, 'call_1_delegate'));
    expect(searches).toEqual(['cats 0']);
    expect(ofType(child, 'TOOL_FAILED')[0].payload.error).toBe(
      "over_budget: search may run at most 1 time per task (agent researcher's profile) and ran 1: answer from what it returned",
    );
  });
});

describe('tool budget helpers', () => {
  it('records only declared budgets', () => {
    expect(
      toolBudgetsOf([
        manifestOf('a', { max_calls_per_task: 2 }),
        manifestOf('b'),
        manifestOf('c', { only_if_previous_empty: true }),
      ]),
    ).toEqual({ a: { max_calls_per_task: 2 }, c: { only_if_previous_empty: true } });
  });
  it.each<[unknown, boolean]>([
    [null, true],
    ['  ', true],
    [[], true],
    [{ hits: [] }, true],
    [{ hits: [], query: '' }, true],
    [{ hits: ['x'] }, false],
    [{ exit_code: 0, stdout: '' }, false],
    ['text', false],
  ])('isEmptyOutput(%j) = %s', (v, empty) => expect(isEmptyOutput(v)).toBe(empty));
});
