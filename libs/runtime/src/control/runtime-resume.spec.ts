import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { NewEvent, ToolManifest, hashArgs } from '@runledger/contracts';
import { ContextBuilder } from '../loop/context-builder';
import { taskReceivedPayload } from '../discipline/testing-events';
import { ScriptedBackend } from '../model/scripted-backend';
import { MemoryRecall } from '../ports';
import { foldProgress } from '../log/progress';
import { AllowAllPolicy, RuleTablePolicy, startTestRuntime, testToolRegistry } from '../testing';
import { useTempStore } from '../testing/temp-store';

const received = (input: string): NewEvent => ({
  type: 'TASK_RECEIVED',
  session_id: 'sess_1',
  payload: taskReceivedPayload(input, { session_id: 'sess_1', source: 'cli' }),
});
const context = (round: number): NewEvent => ({
  type: 'CONTEXT_BUILT',
  payload: {
    round,
    sections: {},
    total_tokens: 0,
    budget_tokens: 0,
    cut: [],
    memory_hits: [],
    compacted: false,
  },
});
const decided = (round: number, directive: object): NewEvent =>
  ({
    type: 'ROUTER_DECIDED',
    payload: { round, directive, source: 'orchestrator', fallback_reason: null, attempts: 1 },
  }) as NewEvent;
const called = (
  call_id: string,
  tool: string,
  args: Record<string, unknown>,
  idempotent: boolean,
): NewEvent => ({
  type: 'TOOL_CALLED',
  payload: { call_id, tool, args, args_hash: hashArgs(tool, args), step_id: null, idempotent, attempt: 1 },
});

describe('resuming from the log (a new runtime on the same store, as after a restart)', () => {
  const temp = useTempStore('rl-resume-unit-');
  /** a fresh runtime's controller; dropped without close, as a crashed process leaves its store */
  const runtime = async (
    script: ConstructorParameters<typeof ScriptedBackend>[0],
    permissions = new AllowAllPolicy(),
  ) =>
    (
      await startTestRuntime({
        store: temp.store,
        tools: testToolRegistry(temp.dir),
        permissions,
        model: new ScriptedBackend(script),
      })
    ).runtime;

  it('an idempotent call with an intent and no outcome runs again (attempt 2)', async () => {
    await temp.store.append(
      'task_a',
      [
        received('echo'),
        context(1),
        decided(1, { type: 'tool', tool: 'echo', args: { text: 'again' } }),
        called('call_1', 'echo', { text: 'again' }, true),
      ],
      { expected: 'no_stream' },
    );
    const sut = await runtime({ orchestrator: ['{"type":"respond","content":"after resume"}'] });
    expect(await sut.resumeUnfinished()).toEqual(['task_a']);
    const p = await sut.settled('task_a');
    expect(p.final).toMatchObject({ stop_reason: 'completed', result: 'after resume' });
    const calls = (await temp.store.readWholeStream('task_a')).filter((e) => e.type === 'TOOL_CALLED');
    expect(calls.map((e) => e.payload)).toEqual([
      expect.objectContaining({ attempt: 1 }),
      expect.objectContaining({ attempt: 2 }),
    ]);
    await sut.close();
  });

  it('a non-idempotent call without outcome becomes outcome_unknown and is not run', async () => {
    await temp.store.append(
      'task_b',
      [
        received('append'),
        context(1),
        decided(1, { type: 'tool', tool: 'append_line', args: { path: 'f.txt', line: 'x' } }),
        called('call_1', 'append_line', { path: 'f.txt', line: 'x' }, false),
      ],
      { expected: 'no_stream' },
    );
    const sut = await runtime({ orchestrator: ['{"type":"fail","reason":"unsure"}'] });
    await sut.resumeUnfinished();
    await sut.settled('task_b');
    const events = await temp.store.readWholeStream('task_b');
    expect(events.filter((e) => e.type === 'TOOL_CALLED')).toHaveLength(1);
    expect(events.find((e) => e.type === 'TOOL_FAILED')?.payload).toMatchObject({
      error_kind: 'outcome_unknown',
    });
    await sut.close();
  });

  it('a task awaiting permission stays waiting across a restart; the answer is taken by the new process', async () => {
    const script = {
      orchestrator: [
        '{"type":"tool","tool":"echo","args":{"text":"ok?"}}',
        '{"type":"respond","content":"done"}',
      ],
    };
    const first = await runtime(script, new RuleTablePolicy({ echo: 'prompt' }));
    const { task_id } = await first.submit({ input: 'ask first' }, { source: 'api' });
    const waiting = await first.settled(task_id);
    expect(waiting.status).toBe('awaiting_permission');
    await first.close();

    const second = await runtime(script, new RuleTablePolicy({ echo: 'prompt' }));
    expect(await second.resumeUnfinished()).toEqual([]);
    await second.resolvePermission(task_id, waiting.pendingPermission!.request_id, 'allow_once');
    expect((await second.settled(task_id)).final?.stop_reason).toBe('completed');
    await second.close();
  });

  it('a round whose context was built but not decided is decided again under the same number', async () => {
    await temp.store.append('task_c', [received('say hi'), context(1)], { expected: 'no_stream' });
    const sut = await runtime({ orchestrator: ['{"type":"respond","content":"hi"}'] });
    await sut.resumeUnfinished();
    await sut.settled('task_c');
    const events = await temp.store.readWholeStream('task_c');
    expect(events.filter((e) => e.type === 'ROUTER_DECIDED').map((e) => e.payload)).toEqual([
      expect.objectContaining({ round: 1 }),
    ]);
    expect(foldProgress('task_c', events).final?.result).toBe('hi');
    await sut.close();
  });

  it('a shutdown leaves a running tool call without outcome; the next boot decides from the intent', async () => {
    const first = await runtime({
      orchestrator: [
        '{"type":"tool","tool":"append_line","args":{"path":"slow.txt","line":"x","delay_ms":5000}}',
        '{"type":"fail","reason":"unsure"}',
      ],
    });
    const { task_id } = await first.submit({ input: 'slow' }, { source: 'api' });
    while (!(await temp.store.readWholeStream(task_id)).some((e) => e.type === 'TOOL_CALLED'))
      await new Promise((r) => setTimeout(r, 10));
    await first.close();
    const atShutdown = await temp.store.readWholeStream(task_id);
    expect(atShutdown.map((e) => e.type)).not.toContain('TOOL_FAILED');
    expect(foldProgress(task_id, atShutdown).final).toBeNull();

    const second = await runtime({
      orchestrator: [
        '{"type":"tool","tool":"append_line","args":{"path":"slow.txt","line":"x","delay_ms":5000}}',
        '{"type":"fail","reason":"unsure"}',
      ],
    });
    expect(await second.resumeUnfinished()).toEqual([task_id]);
    await second.settled(task_id);
    const events = await temp.store.readWholeStream(task_id);
    expect(events.find((e) => e.type === 'TOOL_FAILED')?.payload).toMatchObject({
      error_kind: 'outcome_unknown',
    });
    await second.close();
  });

  it('fork: a new task continues from an event of an old one; what was done is not done again', async () => {
    const original = await runtime({
      orchestrator: [
        '{"type":"tool","tool":"append_line","args":{"path":"f.txt","line":"once"}}',
        '{"type":"respond","content":"A"}',
      ],
    });
    const { task_id } = await original.submit({ input: 'write once then answer' }, { source: 'api' });
    await original.settled(task_id);
    await original.close();
    const source = await temp.store.readWholeStream(task_id);
    const at = source.find((e) => e.type === 'TOOL_COMPLETED')!.sequence;

    const second = await runtime({
      orchestrator: ['(not asked again)', '{"type":"respond","content":"B"}'],
    });
    const fork = await second.fork(task_id, at);
    const p = await second.settled(fork.task_id);
    expect(p.final).toMatchObject({ stop_reason: 'completed', result: 'B' });
    const events = await temp.store.readWholeStream(fork.task_id);
    expect(events[0].payload).toMatchObject({ source: 'fork', forked_from: { task_id, sequence: at } });
    expect(events.slice(1, at).map((e) => e.type)).toEqual(source.slice(1, at).map((e) => e.type));
    expect(events.filter((e) => e.type === 'TOOL_CALLED')).toHaveLength(1);
    expect(readFileSync(join(temp.dir, 'f.txt'), 'utf8')).toBe('once\n');
    expect((await temp.store.readWholeStream(task_id)).length).toBe(source.length);
    await expect(second.fork(task_id, source.length + 1)).rejects.toThrow(/sequence must be between/);
    await second.close();
  });

  it('runs no more tasks at once than its concurrency', async () => {
    const slow = { content: '{"type":"respond","content":"ok"}', delay_ms: 100 };
    const rt = await startTestRuntime({
      store: temp.store,
      tools: testToolRegistry(temp.dir),
      permissions: new AllowAllPolicy(),
      model: new ScriptedBackend({ orchestrator: [slow] }),
      concurrency: 1,
    });
    const ids = await Promise.all(
      ['a', 'b', 'c'].map((input) => rt.runtime.submit({ input }, { source: 'api' }).then((r) => r.task_id)),
    );
    await Promise.all(ids.map((id) => rt.runtime.settled(id)));
    const spans = await Promise.all(
      ids.map(async (id) => {
        const ev = await temp.store.readWholeStream(id);
        return [ev.find((e) => e.type === 'CONTEXT_BUILT')!.position, ev[ev.length - 1].position];
      }),
    );
    spans.sort((x, y) => x[0] - y[0]);
    for (let i = 1; i < spans.length; i++) expect(spans[i][0]).toBeGreaterThan(spans[i - 1][1]);
    await rt.close();
  });
});

describe('ContextBuilder', () => {
  const manifest: ToolManifest = {
    name: 'echo',
    description: 'echo',
    args_schema: {},
    requires_permission: false,
    idempotent: true,
    timeout_ms: 1000,
    secrets: [],
    sensitive_output: false,
    entry: 'index.js',
  };

  it('trims the oldest rounds of history first and records the cut; the newest round stays', async () => {
    const big = 'x'.repeat(300);
    const events = [received('task input')].map((e, i) => ({
      ...e,
      event_id: `e${i}`,
      task_id: 't',
      session_id: 's',
      sequence: i + 1,
      position: i + 1,
      causation_id: null,
      correlation_id: 't',
      created_at: '',
    }));
    const p = foldProgress('t', events as never);
    p.history = [1, 2, 3].map((round) => ({ round, directive: { type: 'tool' }, results: [big], ok: true }));
    const memory: MemoryRecall = { recall: async () => [{ id: 'm1', text: 'remembered fact', score: 0.9 }] };
    const sut = new ContextBuilder(memory, {
      system: 1500,
      memory: 100,
      tools: 100,
      history: 100,
      user: 100,
    });
    const built = await sut.build(p, 4, [manifest]);
    expect(built.event.cut).toEqual(['history:round_1', 'history:round_2']);
    expect(built.view.history.map((h) => h.round)).toEqual([3]);
    expect(built.event.sections.history.trimmed).toBeGreaterThan(0);
    expect(built.event.memory_hits).toEqual([{ id: 'm1', score: 0.9, text: 'remembered fact' }]);
    expect(built.messages[1].content).toContain('remembered fact');
    expect(built.messages[1].content).toContain('## Task\ntask input');
  });
});
