import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RuntimeEvent } from '@runledger/contracts';
import { InMemoryEventStore } from '@runledger/event-store';
import { PermissionService } from '@runledger/permissions';
import { ModelRequest } from '../model/model-backend';
import { ModelScript, ScriptedBackend } from '../model/scripted-backend';
import { replayTask } from '../runtime.module';
import { replayView } from '../replay/replay-view';
import {
  AllowAllPolicy,
  RecordingRuntimeLogger,
  RuleTablePolicy,
  TestRuntime,
  startTestRuntime,
  testToolRegistry,
} from '../testing';

const json = (v: unknown): string => JSON.stringify(v);

/** a plan whose coder step's output is the task's answer */
const coderPlan = json({
  type: 'plan',
  steps: [
    { id: 'code', kind: 'coder', args: { prompt: 'echo "from coder", then say what came back' } },
    { id: 'say', kind: 'respond', args: { content: '${steps.code.output}' }, depends_on: ['code'] },
  ],
});

const echoCall = (id: string, text: string) => ({
  content: '',
  tool_calls: [{ id, name: 'echo', arguments: json({ text }) }],
});

describe('a coder step that speaks the tools protocol', () => {
  let dir: string;
  let store: InMemoryEventStore;
  let rt: TestRuntime;
  let coderRequests: ModelRequest[];

  const build = async (
    script: ModelScript,
    permissions: PermissionService = new AllowAllPolicy(),
    coderToolTurns?: number,
  ) => {
    const model = new ScriptedBackend(script);
    const complete = model.complete.bind(model);
    model.complete = (request) => {
      if (request.role === 'coder') coderRequests.push(request);
      return complete(request);
    };
    rt = await startTestRuntime({ store, tools: testToolRegistry(dir), permissions, model, coderToolTurns });
  };
  const submit = async (input: string) => {
    const { task_id } = await rt.runtime.submit({ input }, { source: 'cli' });
    return { task_id, progress: await rt.runtime.settled(task_id) };
  };
  const ofType = <T extends RuntimeEvent['type']>(events: RuntimeEvent[], type: T) =>
    events.filter((e): e is Extract<RuntimeEvent, { type: T }> => e.type === type);

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'rl-coder-tools-'));
    store = new InMemoryEventStore();
    coderRequests = [];
  });
  afterEach(async () => {
    await rt?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs the coder tool call under the step, sends the result back, and the text answer is the output', async () => {
    await build({
      orchestrator: [coderPlan],
      coder: [echoCall('model_1', 'from coder'), 'the echo said: from coder'],
    });
    const { task_id, progress } = await submit('coder with tools');
    expect(progress.final).toMatchObject({ stop_reason: 'completed', result: 'the echo said: from coder' });

    const events = await store.readWholeStream(task_id);
    expect(ofType(events, 'TOOL_CALLED').map((e) => e.payload)).toEqual([
      expect.objectContaining({ call_id: 'call_1_code_t0_0', tool: 'echo', step_id: 'code' }),
    ]);
    expect(ofType(events, 'STEP_COMPLETED').find((e) => e.payload.step_id === 'code')?.payload.output).toBe(
      'the echo said: from coder',
    );
    expect(ofType(events, 'MODEL_CALLED').filter((e) => e.payload.role === 'coder')).toEqual([
      expect.objectContaining({ payload: expect.objectContaining({ step_id: 'code', round: 1 }) }),
      expect.objectContaining({
        payload: expect.objectContaining({ step_id: 'code', tool_turns: { count: 1, malformed: 0 } }),
      }),
    ]);

    const offered = coderRequests[0].tools!.map((f) => f.name);
    expect(offered).toEqual(expect.arrayContaining(['echo', 'runledger_fail']));
    expect(offered).not.toContain('runledger_plan');
    expect(coderRequests[1].messages.slice(2)).toEqual([
      { role: 'assistant', content: '', tool_calls: echoCall('model_1', 'from coder').tool_calls },
      { role: 'tool', tool_call_id: 'model_1', content: 'from coder' },
    ]);
  });

  it('a failed tool call is told to the coder as an error, and runledger_fail fails the step', async () => {
    await build({
      orchestrator: [coderPlan, '{"type":"fail","reason":"the coder gave up"}'],
      coder: [
        {
          content: '',
          tool_calls: [{ id: 'm1', name: 'file_read', arguments: json({ path: 'absent.txt' }) }],
        },
        {
          content: '',
          tool_calls: [{ id: 'm2', name: 'runledger_fail', arguments: json({ reason: 'no file' }) }],
        },
      ],
    });
    const { task_id } = await submit('coder gives up');
    const events = await store.readWholeStream(task_id);
    expect(coderRequests[1].messages[3]).toMatchObject({ role: 'tool', tool_call_id: 'm1' });
    expect((coderRequests[1].messages[3] as { content: string }).content).toMatch(/^error: /);
    expect(ofType(events, 'STEP_FAILED').find((e) => e.payload.step_id === 'code')?.payload.error).toBe(
      'coder gave up: no file',
    );
  });

  it('two coder calls sharing one id both run, and go back with an id each, so the next request is sent', async () => {
    await build({
      orchestrator: [coderPlan],
      coder: [
        {
          content: '',
          tool_calls: [
            { id: 'same', name: 'echo', arguments: json({ text: 'a' }) },
            { id: 'same', name: 'echo', arguments: json({ text: 'b' }) },
          ],
        },
        'echoed a and b',
      ],
    });
    const { progress } = await submit('coder with a repeated id');
    expect(progress.final).toMatchObject({ stop_reason: 'completed', result: 'echoed a and b' });
    expect(coderRequests).toHaveLength(2);
    expect(
      coderRequests[1].messages.slice(2).map((m) => (m.role === 'tool' ? m.tool_call_id : m.role)),
    ).toEqual(['assistant', 'same', 'same_2']);
  });

  it('a coder answer cut off at the token limit (finish_reason length) fails the step: it is not its output', async () => {
    await build({
      orchestrator: [coderPlan, '{"type":"fail","reason":"cut off"}'],
      coder: [{ content: 'function half(', finish_reason: 'length' }],
    });
    const { task_id } = await submit('coder cut off');
    const events = await store.readWholeStream(task_id);
    expect(ofType(events, 'STEP_COMPLETED').find((e) => e.payload.step_id === 'code')).toBeUndefined();
    expect(ofType(events, 'STEP_FAILED').find((e) => e.payload.step_id === 'code')?.payload.error).toMatch(
      /^coder: the reply was cut off at the output token limit/,
    );
  });

  it('a coder that never answers in text fails the step after its bound of tool-call replies', async () => {
    await build({
      orchestrator: [coderPlan, '{"type":"fail","reason":"looping coder"}'],
      coder: Array.from({ length: 9 }, (_, i) => echoCall(`m${i}`, `again ${i}`)),
    });
    const { task_id } = await submit('looping coder');
    const events = await store.readWholeStream(task_id);
    expect(ofType(events, 'TOOL_CALLED')).toHaveLength(7);
    expect(ofType(events, 'STEP_FAILED').find((e) => e.payload.step_id === 'code')?.payload.error).toBe(
      'coder: no text answer after 8 tool-call replies',
    );
  });

  it('the bound is a setting, recorded with the task, and a replay keeps to the recorded one', async () => {
    await build(
      {
        orchestrator: [coderPlan, '{"type":"fail","reason":"looping coder"}'],
        coder: Array.from({ length: 4 }, (_, i) => echoCall(`m${i}`, `again ${i}`)),
      },
      new AllowAllPolicy(),
      3,
    );
    const { task_id } = await submit('looping coder');
    const events = await store.readWholeStream(task_id);
    expect(ofType(events, 'TASK_RECEIVED')[0].payload.settings).toMatchObject({ coder_tool_turns: 3 });
    expect(ofType(events, 'TOOL_CALLED')).toHaveLength(2);
    expect(ofType(events, 'STEP_FAILED').find((e) => e.payload.step_id === 'code')?.payload.error).toBe(
      'coder: no text answer after 3 tool-call replies',
    );
    const { events: replayed } = await replayTask(
      { store, tools: testToolRegistry(dir), coderToolTurns: 8, logger: new RecordingRuntimeLogger() },
      task_id,
    );
    expect(replayView(replayed)).toEqual(replayView(events));
  });

  it('after a restart a new runtime rebuilds the coder conversation from the log: no reply asked twice, no call run twice', async () => {
    const script: ModelScript = {
      orchestrator: [coderPlan],
      coder: [
        {
          content: '',
          tool_calls: [{ id: 'm1', name: 'append_line', arguments: json({ path: 'log.txt', line: 'once' }) }],
        },
        echoCall('m2', 'guarded'),
        'appended, then echoed',
      ],
    };
    await build(script, new RuleTablePolicy({ echo: 'prompt' }));
    const { task_id, progress } = await submit('coder across a restart');
    expect(progress.status).toBe('awaiting_permission');
    await rt.close();

    coderRequests = [];
    await build(script, new RuleTablePolicy({ echo: 'prompt' }));
    await rt.runtime.resolvePermission(task_id, progress.pendingPermission!.request_id, 'allow_once');
    const after = await rt.runtime.settled(task_id);
    expect(after.final).toMatchObject({ stop_reason: 'completed', result: 'appended, then echoed' });

    expect(readFileSync(join(dir, 'log.txt'), 'utf8')).toBe('once\n');
    const events = await store.readWholeStream(task_id);
    expect(ofType(events, 'TOOL_CALLED').map((e) => e.payload.call_id)).toEqual([
      'call_1_code_t0_0',
      'call_1_code_t1_0',
    ]);
    expect(ofType(events, 'MODEL_CALLED').filter((e) => e.payload.role === 'coder')).toHaveLength(3);
    // the new runtime asked only for the last reply, with the whole conversation rebuilt
    expect(coderRequests).toHaveLength(1);
    expect(coderRequests[0].messages.slice(2).map((m) => m.role)).toEqual([
      'assistant',
      'tool',
      'assistant',
      'tool',
    ]);
    expect(coderRequests[0].messages[3]).toEqual({
      role: 'tool',
      tool_call_id: 'm1',
      content: 'appended once',
    });
  });

  it('a coder tool call that needs permission suspends the task; after allow it resumes without asking again', async () => {
    await build(
      {
        orchestrator: [coderPlan],
        coder: [echoCall('m1', 'guarded'), echoCall('m2', 'second'), 'both echoed'],
      },
      new RuleTablePolicy({ echo: 'prompt' }),
    );
    const { task_id, progress } = await submit('guarded coder');
    expect(progress.status).toBe('awaiting_permission');
    expect(progress.pendingPermission).toMatchObject({ tool: 'echo', args: { text: 'guarded' } });
    await rt.runtime.resolvePermission(task_id, progress.pendingPermission!.request_id, 'allow_once');
    const second = await rt.runtime.settled(task_id);
    expect(second.status).toBe('awaiting_permission');
    expect(second.pendingPermission).toMatchObject({ tool: 'echo', args: { text: 'second' } });
    await rt.runtime.resolvePermission(task_id, second.pendingPermission!.request_id, 'allow_once');
    const after = await rt.runtime.settled(task_id);
    expect(after.final).toMatchObject({ stop_reason: 'completed', result: 'both echoed' });

    const events = await store.readWholeStream(task_id);
    expect(ofType(events, 'TOOL_CALLED').map((e) => e.payload.call_id)).toEqual([
      'call_1_code_t0_0',
      'call_1_code_t1_0',
    ]);
    expect(ofType(events, 'TOOL_COMPLETED')).toHaveLength(2);
    // each reply was asked for once: the resumed step read the earlier ones from the log
    expect(ofType(events, 'MODEL_CALLED').filter((e) => e.payload.role === 'coder')).toHaveLength(3);
    expect(coderRequests[2].messages.slice(2)).toEqual([
      { role: 'assistant', content: '', tool_calls: echoCall('m1', 'guarded').tool_calls },
      { role: 'tool', tool_call_id: 'm1', content: 'guarded' },
      { role: 'assistant', content: '', tool_calls: echoCall('m2', 'second').tool_calls },
      { role: 'tool', tool_call_id: 'm2', content: 'second' },
    ]);

    await rt.close();
    rmSync(dir, { recursive: true, force: true });
    const { events: replayed } = await replayTask(
      { store, tools: testToolRegistry(dir), logger: new RecordingRuntimeLogger() },
      task_id,
    );
    expect(replayView(replayed)).toEqual(replayView(events));
  });
});
