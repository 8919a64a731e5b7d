import { RuntimeEvent } from '@runledger/contracts';
import { ModelBackend } from '../model/model-backend';
import { ScriptItem, ScriptedBackend } from '../model/scripted-backend';
import { replayTask } from '../runtime.module';
import { replayView } from '../replay/replay-view';
import { DEFAULT_DISCIPLINE_SETTINGS } from './settings';
import {
  RecordingRuntimeLogger,
  RuleTablePolicy,
  startTestRuntime,
  TestRuntime,
  testToolRegistry,
} from '../testing';
import { useTempStore } from '../testing/temp-store';
import { classifyRequest } from './request-intent';
import { todoList, todoStateFromEvents } from './todos';

const plan = (
  todos: unknown[],
  steps: unknown[] = [{ id: 's1', kind: 'tool', tool: 'echo', args: { text: 'a' } }],
) => JSON.stringify({ type: 'plan', steps, todos });
const update = (id: string, status: string, note?: string) =>
  JSON.stringify({ type: 'tool', tool: 'todo_update', args: { id, status, ...(note ? { note } : {}) } });
const respond = (content: string) => JSON.stringify({ type: 'respond', content });
const TWO_TODOS = [
  { id: 'parse', text: 'parse the input' },
  { id: 'tests', text: 'add the tests' },
  { id: 'polish', text: 'tidy the wording', required: false },
];

describe('todos owned by the plan, checked by the accept gate', () => {
  const temp = useTempStore('rl-todos-', () => rt?.close());
  let rt: TestRuntime;

  const start = async (model: ModelBackend, extra: Partial<Parameters<typeof startTestRuntime>[0]> = {}) => {
    rt = await startTestRuntime({
      store: temp.store,
      tools: testToolRegistry(temp.dir),
      permissions: new RuleTablePolicy({}),
      model,
      ...extra,
    });
  };
  const run = async (input: string, session_id?: string) => {
    const { task_id } = await rt.runtime.submit(
      { input, ...(session_id ? { session_id } : {}) },
      { source: 'cli' },
    );
    const progress = await rt.runtime.settled(task_id);
    return { task_id, progress, events: await temp.store.readWholeStream(task_id) };
  };
  const ofType = <T extends RuntimeEvent['type']>(events: RuntimeEvent[], type: T) =>
    events.filter((e): e is Extract<RuntimeEvent, { type: T }> => e.type === type);

  it('a plan whose required todo is left open ends accept_check_failed naming it', async () => {
    await start(
      new ScriptedBackend({
        orchestrator: [plan(TWO_TODOS), update('parse', 'done'), respond('all done')],
      }),
    );
    const { progress, events } = await run('parse the file and add tests');
    expect(progress.final).toMatchObject({ stop_reason: 'accept_check_failed' });
    expect(progress.final!.detail).toMatch(/todos_done/);
    expect(progress.final!.detail).toMatch(/tests \(pending: add the tests\)/);
    expect(progress.final!.detail).not.toMatch(/polish/);
    const added = ofType(events, 'TODO_ADDED');
    expect(added.map((e) => [e.payload.todo_id, e.payload.owner])).toEqual([
      ['parse', { kind: 'plan', plan_id: 'plan_1' }],
      ['tests', { kind: 'plan', plan_id: 'plan_1' }],
      ['polish', { kind: 'plan', plan_id: 'plan_1' }],
    ]);
    const decided = ofType(events, 'ACCEPTANCE_DECIDED');
    expect(decided.map((e) => e.payload)).toEqual([
      {
        passed: false,
        results: [
          expect.objectContaining({ id: 'todos', kind: 'todos_done', required: true, passed: false }),
        ],
      },
    ]);
  });

  it('the same plan with its required todos done (or cancelled with a note) completes', async () => {
    await start(
      new ScriptedBackend({
        orchestrator: [
          plan(TWO_TODOS),
          update('parse', 'in_progress'),
          update('parse', 'done'),
          update('tests', 'cancelled', 'the file has no logic to test'),
          respond('all done'),
        ],
      }),
    );
    const { progress, events } = await run('parse the file and add tests');
    expect(progress.final).toMatchObject({ stop_reason: 'completed', result: 'all done' });
    expect(ofType(events, 'ACCEPTANCE_DECIDED')[0].payload).toMatchObject({
      passed: true,
      results: [{ kind: 'todos_done', passed: true }],
    });
    expect(todoList(todoStateFromEvents(events)).map((t) => [t.id, t.status, t.note])).toEqual([
      ['parse', 'done', null],
      ['tests', 'cancelled', 'the file has no logic to test'],
      ['polish', 'pending', null],
    ]);
  });

  it('an unknown id fails with todo_not_found and the active ids; a cancel without a note is refused', async () => {
    await start(
      new ScriptedBackend({
        orchestrator: [
          plan(TWO_TODOS.slice(0, 2)),
          update('parsing', 'done'),
          update('tests', 'cancelled'),
          update('parse', 'done'),
          update('tests', 'done'),
          respond('done'),
        ],
      }),
    );
    const { progress, events } = await run('parse it');
    expect(progress.final).toMatchObject({ stop_reason: 'completed' });
    const failed = ofType(events, 'TOOL_FAILED').map((e) => e.payload);
    expect(failed).toEqual([
      expect.objectContaining({
        tool: 'todo_update',
        error_kind: 'validation_error',
        error: 'todo_not_found: no active todo parsing; active ids: parse, tests',
      }),
      expect.objectContaining({ error: expect.stringMatching(/^todo_note_required: cancelling tests/) }),
    ]);
    // the model reads the refusal in its next round, ids and all
    const rounds = ofType(events, 'CONTEXT_BUILT').length;
    expect(rounds).toBe(6);
  });

  it("a session's second task starts with an empty list, and its prompt has no todos", async () => {
    const seen: string[] = [];
    const watched = (script: string[]) => {
      const model = new ScriptedBackend({ orchestrator: script });
      const complete = model.complete.bind(model);
      model.complete = async (req) => {
        seen.push(req.messages.map((m) => m.content).join('\n'));
        return complete(req);
      };
      return model;
    };
    await start(watched([plan(TWO_TODOS.slice(0, 1)), update('parse', 'done'), respond('first')]));
    const first = await run('parse the file', 'sess-1');
    expect(first.progress.final).toMatchObject({ stop_reason: 'completed' });
    expect(first.progress.todos.items.size).toBe(1);
    expect(seen[1]).toContain('## Todos\n- [pending] parse: parse the input');
    await rt.close();
    await start(watched([respond('second')]));
    const second = await run('and now summarise it', 'sess-1');
    expect(second.progress.final).toMatchObject({ stop_reason: 'completed', result: 'second' });
    expect(second.progress.todos.items.size).toBe(0);
    expect(ofType(second.events, 'TODO_ADDED')).toEqual([]);
    expect(seen[3]).not.toContain('## Todos');
    expect(seen[3]).not.toContain('todo_update');
    expect(seen[3]).toContain('Earlier task of this session');
  });

  it('native tool calls: runledger_todo adds and updates; the list is offered once todos are in play', async () => {
    const call = (id: string, name: string, args: unknown): ScriptItem => ({
      content: '',
      tool_calls: [{ id, name, arguments: JSON.stringify(args) }],
    });
    const model = new ScriptedBackend({
      orchestrator: [
        call('c1', 'runledger_plan', {
          steps: [{ id: 's1', kind: 'tool', tool: 'echo', args: { text: 'x' } }],
          todos: [{ id: 'a', text: 'do a' }],
        }),
        call('c2', 'runledger_todo', { op: 'add', id: 'b', text: 'do b' }),
        call('c3', 'runledger_todo', { op: 'update', id: 'zz', status: 'done' }),
        {
          content: '',
          tool_calls: [
            {
              id: 'c4',
              name: 'runledger_todo',
              arguments: JSON.stringify({ op: 'update', id: 'a', status: 'done' }),
            },
            {
              id: 'c5',
              name: 'runledger_todo',
              arguments: JSON.stringify({ op: 'update', id: 'b', status: 'done' }),
            },
          ],
        },
        { content: 'finished' },
      ],
    });
    const tools: string[][] = [];
    const complete = model.complete.bind(model);
    model.complete = async (req) => {
      tools.push((req.tools ?? []).map((t) => t.name));
      return complete(req);
    };
    await start(model);
    const { progress, events } = await run('do a and b');
    expect(progress.final).toMatchObject({ stop_reason: 'completed', result: 'finished' });
    expect(tools[0]).not.toContain('runledger_todo');
    expect(tools[1]).toContain('runledger_todo');
    expect(ofType(events, 'TODO_ADDED').map((e) => [e.payload.todo_id, e.payload.owner.kind])).toEqual([
      ['a', 'plan'],
      ['b', 'round'],
    ]);
    expect(ofType(events, 'TOOL_FAILED')[0].payload.error).toBe(
      'todo_not_found: no active todo zz; active ids: a, b',
    );
    expect(ofType(events, 'ACCEPTANCE_DECIDED')[0].payload.passed).toBe(true);
  });

  it('with run discipline the completion reminder lists the open todos, and the gate judges them with the checks', async () => {
    await start(
      new ScriptedBackend({
        orchestrator: [plan(TWO_TODOS.slice(0, 1)), 'I think I am done.', respond('done')],
      }),
      { discipline: DEFAULT_DISCIPLINE_SETTINGS },
    );
    const { task_id } = await rt.runtime.submit(
      { input: 'parse it', accept_checks: [{ id: 'answered', kind: 'output_only' } as never] },
      { source: 'cli' },
    );
    const progress = await rt.runtime.settled(task_id);
    const events = await temp.store.readWholeStream(task_id);
    const reminder = ofType(events, 'GUARD_TRIGGERED').find((e) => e.payload.guard === 'completion_reminder');
    expect(reminder!.payload.detail).toContain('Open todos:\n- [pending] parse: parse the input');
    expect(progress.final).toMatchObject({ stop_reason: 'accept_check_failed' });
    expect(ofType(events, 'ACCEPTANCE_DECIDED')[0].payload.results.map((r) => [r.id, r.passed])).toEqual([
      ['answered', true],
      ['todos', false],
    ]);
  });

  it('with todos on, a request for a change gets one reminder to create its todos; a question gets none', async () => {
    await start(new ScriptedBackend({ orchestrator: [respond('no'), respond('answered')] }), { todos: true });
    const build = await run('create the file notes.txt with a greeting');
    expect(build.events[0]).toMatchObject({ payload: { settings: { todos: 'on' } } });
    const reminders = ofType(build.events, 'GUARD_TRIGGERED').filter(
      (e) => e.payload.guard === 'todo_reminder',
    );
    expect(reminders).toHaveLength(1);
    expect(reminders[0].payload.data).toMatchObject({ reason: expect.stringContaining('create') });
    const question = await run('what does notes.txt say?');
    expect(ofType(question.events, 'GUARD_TRIGGERED')).toEqual([]);
  });

  it('replay reproduces the todos event for event', async () => {
    await start(
      new ScriptedBackend({
        orchestrator: [
          plan(TWO_TODOS.slice(0, 2)),
          update('nope', 'done'),
          update('parse', 'done'),
          respond('half'),
        ],
      }),
    );
    const { task_id, events } = await run('parse and test');
    await rt.close();
    const { events: replayed } = await replayTask(
      { store: temp.store, tools: testToolRegistry(temp.dir), logger: new RecordingRuntimeLogger() },
      task_id,
    );
    expect(replayView(replayed)).toEqual(replayView(events));
    expect(todoList(todoStateFromEvents(replayed))).toEqual(todoList(todoStateFromEvents(events)));
  });
});

describe('classifyRequest', () => {
  it.each<[string, boolean]>([
    ['create the file notes.txt with a greeting', true],
    ['Please fix the failing test in src/app.ts', true],
    ['read a.txt and write a summary to b.txt', true],
    ['delete old logs', true],
    ['summarise README.md', false],
    ['write a summary of README.md', false],
    ['what does notes.txt say?', false],
    ['summarise the repo; do not change anything', false],
    ["Don't delete anything, just list the files", false],
  ])('%s -> mutation %s', (input, mutation) => {
    expect(classifyRequest(input).mutation).toBe(mutation);
  });
});
