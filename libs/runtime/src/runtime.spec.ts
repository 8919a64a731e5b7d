import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { EventType, NewEvent, RuntimeEvent } from '@runledger/contracts';
import { PermissionService } from '@runledger/permissions';
import { ModelBackend } from './model/model-backend';
import { ModelScript, ScriptedBackend } from './model/scripted-backend';
import { SysUtilBackend } from './model/sys-util';
import {
  AllowAllPolicy,
  manifestOf,
  RecordingRuntimeLogger,
  RuleTablePolicy,
  startTestRuntime,
  TestRuntime,
  testToolRegistry,
} from './testing';
import { useTempStore } from './testing/temp-store';

const types = (events: RuntimeEvent[]): EventType[] => events.map((e) => e.type);
const json = (v: unknown): string => JSON.stringify(v);
/** two independent `meet` steps and a third that joins their outputs */
const PARALLEL_PLAN = {
  type: 'plan',
  steps: [
    { id: 'left', kind: 'tool', tool: 'meet', args: { line: 'L' } },
    { id: 'right', kind: 'tool', tool: 'meet', args: { line: 'R' } },
    {
      id: 'join',
      kind: 'tool',
      tool: 'echo',
      args: { text: '${steps.left.output} + ${steps.right.output}' },
      depends_on: ['left', 'right'],
    },
  ],
};

describe('RuntimeController with the in-memory store', () => {
  const temp = useTempStore('rl-runtime-', () => rt?.close());
  let rt: TestRuntime;

  const build = async (
    model: ModelBackend,
    permissions: PermissionService = new AllowAllPolicy(),
    extra: Partial<Parameters<typeof startTestRuntime>[0]> = {},
  ) => {
    rt = await startTestRuntime({
      store: temp.store,
      tools: testToolRegistry(temp.dir),
      permissions,
      model,
      ...extra,
    });
    return rt.runtime;
  };
  const scripted = (script: ModelScript) => build(new ScriptedBackend(script));
  const run = async (input: string) => {
    const { task_id } = await rt.runtime.submit({ input }, { source: 'cli' });
    const progress = await rt.runtime.settled(task_id);
    return { task_id, progress, events: await temp.store.readWholeStream(task_id) };
  };

  it('sys_util runs "run A then read B" as a two-step plan and answers with the results in round 2', async () => {
    await build(new SysUtilBackend());
    writeFileSync(join(temp.dir, 'f.txt'), 'file body');
    const { progress, events } = await run('run echo hello then read f.txt');
    expect(progress.final).toMatchObject({ stop_reason: 'completed' });
    expect(types(events)).toEqual([
      'TASK_RECEIVED',
      'CONTEXT_BUILT',
      'MODEL_CALLED',
      'MODEL_RESPONDED',
      'ROUTER_DECIDED',
      'PLAN_STARTED',
      'STEP_STARTED',
      'TOOL_CALLED',
      'TOOL_COMPLETED',
      'STEP_COMPLETED',
      'STEP_STARTED',
      'TOOL_CALLED',
      'TOOL_COMPLETED',
      'STEP_COMPLETED',
      'PLAN_COMPLETED',
      'CONTEXT_BUILT',
      'MODEL_CALLED',
      'MODEL_RESPONDED',
      'ROUTER_DECIDED',
      'TASK_COMPLETED',
    ]);
    expect(events.map((e) => e.sequence)).toEqual(events.map((_, i) => i + 1));
    const done = events[events.length - 1];
    expect(done.type === 'TASK_COMPLETED' && done.payload.result).toContain('hello');
    expect(done.type === 'TASK_COMPLETED' && done.payload.result).toContain('file body');
    expect(done.type === 'TASK_COMPLETED' && done.payload.usage).toMatchObject({
      rounds: 2,
      tool_calls: 2,
      model_calls: 2,
      total_tokens: 0,
    });
  });

  it('sys_util answers input it does not understand with its help text, and the task stops not_understood', async () => {
    await build(new SysUtilBackend());
    const { events } = await run('what is the weather');
    const last = events[events.length - 1];
    expect(last.type).toBe('TASK_FAILED');
    expect(last.payload).toMatchObject({ stop_reason: 'not_understood' });
    expect(json(last.payload)).toContain('RUNLEDGER_MODEL=openai');
  });

  it('an invalid directive gets one correction round, then the valid one runs', async () => {
    await scripted({
      orchestrator: [
        'I think we should echo',
        '```json\n{"type":"tool","tool":"echo","args":{"text":"hi"}}\n```',
        '{"type":"respond","content":"said hi"}',
      ],
    });
    const { events, progress } = await run('say hi');
    expect(progress.final).toMatchObject({ stop_reason: 'completed', result: 'said hi' });
    const decided = events.filter((e) => e.type === 'ROUTER_DECIDED');
    expect(decided[0].payload).toMatchObject({
      source: 'orchestrator',
      attempts: 2,
      directive: { type: 'tool', tool: 'echo' },
    });
    expect(events.filter((e) => e.type === 'GUARD_TRIGGERED').map((e) => e.payload)).toEqual([
      expect.objectContaining({ guard: 'correction' }),
    ]);
    const second = events.filter((e) => e.type === 'MODEL_CALLED')[1];
    expect(second.payload).toMatchObject({ role: 'orchestrator', round: 1 });
  });

  it('invalid twice falls back to sys_util; when sys_util cannot help either the task stops with validation_error', async () => {
    await scripted({ orchestrator: ['{"type":"tool"}', '{"type":"explode"}'] });
    const { events, progress } = await run('do something clever');
    expect(progress.final).toMatchObject({ stop_reason: 'validation_error' });
    expect(types(events)).not.toContain('TOOL_CALLED');
    expect(types(events)).not.toContain('ROUTER_DECIDED');
  });

  it('invalid twice falls back to sys_util, which runs an input it understands', async () => {
    await scripted({ orchestrator: ['{"type":"tool"}', 'nope', '{"type":"respond","content":"ok"}'] });
    const { events, progress } = await run('run echo fallback');
    const decided = events.find((e) => e.type === 'ROUTER_DECIDED')!;
    expect(decided.payload).toMatchObject({
      source: 'sys_util',
      directive: { type: 'tool', tool: 'shell_exec' },
    });
    expect(json(decided.payload)).toContain('invalid_directive');
    expect(progress.final).toMatchObject({ stop_reason: 'completed', result: 'ok' });
  });

  it('a plan with a cycle fails with PLAN_FAILED naming the cycle; nothing runs', async () => {
    const plan = {
      type: 'plan',
      steps: [
        { id: 'a', kind: 'tool', tool: 'echo', args: { text: 'a' }, depends_on: ['c'] },
        { id: 'b', kind: 'tool', tool: 'echo', args: { text: 'b' }, depends_on: ['a'] },
        { id: 'c', kind: 'tool', tool: 'echo', args: { text: 'c' }, depends_on: ['b'] },
      ],
    };
    await scripted({ orchestrator: [json(plan), '{"type":"fail","reason":"cannot plan"}'] });
    const { events, progress } = await run('cyclic');
    const failed = events.find((e) => e.type === 'PLAN_FAILED')!;
    expect(failed.type === 'PLAN_FAILED' && failed.payload.cycle).toEqual(['a', 'c', 'b', 'a']);
    expect(types(events)).not.toContain('TOOL_CALLED');
    expect(progress.final).toMatchObject({ stop_reason: 'model_gave_up', detail: 'cannot plan' });
  });

  it("sys_util's fail only reports the step that failed: tool_error", async () => {
    await build(new SysUtilBackend());
    const { progress, events } = await run('read missing.txt');
    expect(types(events)).toContain('TOOL_FAILED');
    expect(progress.final?.stop_reason).toBe('tool_error');
  });

  it('a failing step stops the plan: later steps are skipped, PLAN_FAILED names the step', async () => {
    const plan = {
      type: 'plan',
      steps: [
        { id: 'ok', kind: 'tool', tool: 'echo', args: { text: 'fine' } },
        { id: 'bad', kind: 'tool', tool: 'file_read', args: { path: 'missing.txt' }, depends_on: ['ok'] },
        {
          id: 'later',
          kind: 'tool',
          tool: 'echo',
          args: { text: '${steps.bad.output}' },
          depends_on: ['bad'],
        },
      ],
    };
    await scripted({ orchestrator: [json(plan), '{"type":"fail","reason":"read failed"}'] });
    const { events } = await run('fails');
    const stepFailed = events.filter((e) => e.type === 'STEP_FAILED').map((e) => e.payload);
    expect(stepFailed).toEqual([
      expect.objectContaining({ step_id: 'bad', skipped: false }),
      expect.objectContaining({ step_id: 'later', skipped: true }),
    ]);
    const pf = events.find((e) => e.type === 'PLAN_FAILED')!;
    expect(pf.payload).toMatchObject({ failed_step: 'bad' });
    expect(pf.type === 'PLAN_FAILED' && pf.payload.step_results.map((r) => r.status)).toEqual([
      'completed',
      'failed',
      'skipped',
    ]);
    expect(events.filter((e) => e.type === 'TOOL_CALLED')).toHaveLength(2);
  });

  it('a 3-step DAG runs its two independent steps in parallel and feeds outputs forward', async () => {
    // each of the two steps waits for the other to be running: one after the other, the first never ends
    let arrived = 0;
    let bothRunning!: () => void;
    const meeting = new Promise<void>((resolve) => (bothRunning = resolve));
    const tools = testToolRegistry(temp.dir).add(
      manifestOf('meet', {
        args_schema: { type: 'object', properties: { line: { type: 'string' } } },
        timeout_ms: 10_000,
      }),
      async (args) => {
        if (++arrived === 2) bothRunning();
        await meeting;
        return `met ${String(args.line)}`;
      },
    );
    await build(
      new ScriptedBackend({ orchestrator: [json(PARALLEL_PLAN), '{"type":"respond","content":"joined"}'] }),
      new AllowAllPolicy(),
      { tools },
    );
    const { events, progress } = await run('dag');
    expect(progress.final?.stop_reason).toBe('completed');
    const idx = (t: EventType, step: string) =>
      events.findIndex((e) => e.type === t && (e.payload as { step_id?: string }).step_id === step);
    expect(idx('STEP_STARTED', 'right')).toBeLessThan(idx('STEP_COMPLETED', 'left'));
    expect(idx('STEP_STARTED', 'left')).toBeLessThan(idx('STEP_COMPLETED', 'right'));
    expect(idx('STEP_STARTED', 'join')).toBeGreaterThan(
      Math.max(idx('STEP_COMPLETED', 'left'), idx('STEP_COMPLETED', 'right')),
    );
    const join = events.find((e) => e.type === 'STEP_COMPLETED' && e.payload.step_id === 'join')!;
    expect(join.payload).toMatchObject({ output: 'met L + met R' });
  });

  it('stops with budget_exceeded at the round cap', async () => {
    await build(
      new ScriptedBackend({
        orchestrator: Array(5).fill('{"type":"tool","tool":"echo","args":{"text":"again"}}'),
      }),
      new AllowAllPolicy(),
      { maxRounds: 3 },
    );
    const { progress } = await run('loop forever');
    expect(progress.final).toMatchObject({ stop_reason: 'budget_exceeded' });
    expect(progress.usage.rounds).toBe(3);
  });

  it('a prompt suspends the task durably; allow_once resumes it; a stale request is refused', async () => {
    await build(
      new ScriptedBackend({
        orchestrator: [
          '{"type":"tool","tool":"echo","args":{"text":"guarded"}}',
          '{"type":"respond","content":"done"}',
        ],
      }),
      new RuleTablePolicy({ echo: 'prompt' }),
    );
    const { task_id, progress } = await run('guarded echo');
    expect(progress.status).toBe('awaiting_permission');
    const req = progress.pendingPermission!;
    expect(req).toMatchObject({ tool: 'echo', args: { text: 'guarded' } });
    await expect(rt.runtime.resolvePermission(task_id, 'perm_other', 'allow_once')).rejects.toThrow(
      /not pending/,
    );
    await rt.runtime.resolvePermission(task_id, req.request_id, 'allow_once');
    const after = await rt.runtime.settled(task_id);
    expect(after.final).toMatchObject({ stop_reason: 'completed', result: 'done' });
    await expect(rt.runtime.resolvePermission(task_id, req.request_id, 'allow_once')).rejects.toThrow(
      /not pending/,
    );
    const t = types(await temp.store.readWholeStream(task_id));
    expect(t.indexOf('PERMISSION_RESOLVED')).toBeLessThan(t.indexOf('TOOL_CALLED'));
  });

  it('deny tells the orchestrator (TOOL_FAILED permission_denied); hard_stop fails the task', async () => {
    await build(
      new ScriptedBackend({
        orchestrator: [
          '{"type":"tool","tool":"echo","args":{"text":"x"}}',
          '{"type":"fail","reason":"not allowed"}',
        ],
      }),
      new RuleTablePolicy({ echo: 'deny' }),
    );
    const denied = await run('deny me');
    expect(denied.events.find((e) => e.type === 'TOOL_FAILED')?.payload).toMatchObject({
      error_kind: 'permission_denied',
    });
    expect(denied.progress.final?.stop_reason).toBe('permission_denied');
    await rt.close();

    await build(
      new ScriptedBackend({
        orchestrator: ['{"type":"tool","tool":"shell_exec","args":{"command":"rm -rf /"}}'],
      }),
      new RuleTablePolicy({ shell_exec: 'hard_stop' }),
    );
    const stopped = await run('wipe');
    expect(stopped.progress.final?.stop_reason).toBe('permission_denied');
    expect(types(stopped.events)).not.toContain('TOOL_CALLED');
  });

  it('allow_always of the session is applied to the next task without asking', async () => {
    const script = {
      orchestrator: [
        '{"type":"tool","tool":"echo","args":{"text":"a"}}',
        '{"type":"respond","content":"done"}',
      ],
    };
    await build(new ScriptedBackend(script), new RuleTablePolicy({ echo: 'prompt' }));
    const first = await rt.runtime.submit({ input: 'one', session_id: 'sess_a' }, { source: 'cli' });
    const p1 = await rt.runtime.settled(first.task_id);
    await rt.runtime.resolvePermission(first.task_id, p1.pendingPermission!.request_id, 'allow_always');
    expect((await rt.runtime.settled(first.task_id)).status).toBe('completed');
    const second = await rt.runtime.submit({ input: 'two', session_id: 'sess_a' }, { source: 'cli' });
    expect((await rt.runtime.settled(second.task_id)).status).toBe('completed');
    const other = await rt.runtime.submit({ input: 'three', session_id: 'sess_b' }, { source: 'cli' });
    expect((await rt.runtime.settled(other.task_id)).status).toBe('awaiting_permission');
  });

  it('a secret is asked for, used by the tool, redacted from its output and never logged', async () => {
    const tools = testToolRegistry(temp.dir);
    const m = manifestOf('whoami', { description: 'prints the token', secrets: ['API_TOKEN'] });
    tools.add(m, async (_a, ctx) => `token is ${ctx.secrets.get('API_TOKEN')}`);
    rt = await startTestRuntime({
      store: temp.store,
      tools,
      permissions: new AllowAllPolicy(),
      model: new ScriptedBackend({
        orchestrator: ['{"type":"tool","tool":"whoami","args":{}}', '{"type":"respond","content":"done"}'],
      }),
    });
    const { task_id } = await rt.runtime.submit({ input: 'who' }, { source: 'cli' });
    const waiting = await rt.runtime.settled(task_id);
    expect(waiting.status).toBe('awaiting_secret');
    expect(waiting.pendingSecret).toMatchObject({ secret_name: 'API_TOKEN' });
    await rt.runtime.provideSecret(task_id, waiting.pendingSecret!.request_id, 's3cr3t-value');
    expect((await rt.runtime.settled(task_id)).status).toBe('completed');
    const log = json(await temp.store.readWholeStream(task_id));
    expect(log).not.toContain('s3cr3t-value');
    expect(log).toContain('token is [REDACTED]');
  });

  it('a task that stops on an unexpected error is logged with its task_id as a field', async () => {
    const logger = new RecordingRuntimeLogger();
    await build(new SysUtilBackend(), new AllowAllPolicy(), {
      logger,
      guards: [
        {
          beforeRound: async () => {
            throw new Error('guard broke');
          },
        },
      ],
    });
    const { task_id } = await run('hello');
    expect(logger.lines).toEqual([
      expect.objectContaining({
        level: 'error',
        msg: 'task stopped on an unexpected error',
        fields: { task_id, err: expect.objectContaining({ message: 'guard broke' }) },
      }),
    ]);
  });

  it("end guards: an earlier guard's events are in the log the next one sees; the last guard's unmetered events commit with the final event, metered ones on their own", async () => {
    const seen: EventType[][] = [];
    const note = (n: number): NewEvent => ({
      type: 'ACCEPTANCE_DECIDED' as const,
      payload: {
        passed: true,
        results: [
          { id: `c${n}`, kind: 'output_only' as const, required: true, passed: true, detail: 'noted' },
        ],
      },
    });
    const metered: NewEvent = {
      type: 'TOOL_FAILED',
      payload: {
        call_id: 'call_end',
        tool: 'x',
        result: null,
        error: 'no',
        error_kind: 'tool_error',
        duration_ms: 1,
      },
    };
    let last: NewEvent[] = [note(2)];
    await build(new SysUtilBackend(), new AllowAllPolicy(), {
      guards: [
        { beforeEnd: async () => ({ events: [note(1)] }) },
        {
          beforeEnd: async (ctx: { events: readonly RuntimeEvent[] }) => {
            seen.push(types([...ctx.events]).slice(-1));
            return { events: last };
          },
        },
      ],
    });
    const commits: EventType[][] = [];
    const detach = temp.store.onCommitted((events) => commits.push(types([...events])));
    const first = await run('run echo hello');
    expect(first.progress.final).toMatchObject({ stop_reason: 'completed' });
    expect(seen).toEqual([['ACCEPTANCE_DECIDED']]);
    // the reply and the decision that ended the task ride with the first guard's events (sys_util answers
    // in process: its call rides with them too, and so does the echo's outcome, handed over before the round)
    expect(commits.slice(-2)).toEqual([
      [
        'TOOL_COMPLETED',
        'CONTEXT_BUILT',
        'MODEL_CALLED',
        'MODEL_RESPONDED',
        'ROUTER_DECIDED',
        'ACCEPTANCE_DECIDED',
      ],
      ['ACCEPTANCE_DECIDED', 'TASK_COMPLETED'],
    ]);

    last = [metered];
    const second = await run('run echo hello again');
    detach();
    expect(commits.slice(-2)).toEqual([['TOOL_FAILED'], ['TASK_COMPLETED']]);
    // the metered event counts in the final usage
    const completed = second.events[second.events.length - 1];
    expect(completed.type === 'TASK_COMPLETED' && completed.payload.usage.failures).toBe(1);
  });

  it('idempotency: the same key and body return the same task, a different body conflicts, racing submits create one task', async () => {
    await build(new SysUtilBackend());
    const results = await Promise.all(
      [1, 2, 3].map(() =>
        rt.runtime.submit({ input: 'run echo once' }, { source: 'api', idempotency_key: 'k1' }),
      ),
    );
    expect(new Set(results.map((r) => r.task_id)).size).toBe(1);
    expect(results.filter((r) => r.created)).toHaveLength(1);
    await expect(
      rt.runtime.submit({ input: 'run echo other' }, { source: 'api', idempotency_key: 'k1' }),
    ).rejects.toThrow(/different request/);
    await rt.runtime.settled(results[0].task_id);
    const received = (await temp.store.readAll({ types: ['TASK_RECEIVED'] })).length;
    expect(received).toBe(1);
  });

  it('cancel aborts a running tool and ends the task cancelled', async () => {
    await scripted({
      orchestrator: [
        '{"type":"tool","tool":"append_line","args":{"path":"slow.txt","line":"x","delay_ms":5000}}',
      ],
    });
    const { task_id } = await rt.runtime.submit({ input: 'slow' }, { source: 'cli' });
    for (let i = 0; i < 100 && !types(await temp.store.readWholeStream(task_id)).includes('TOOL_CALLED'); i++)
      await new Promise((r) => setTimeout(r, 10));
    const started = Date.now();
    await rt.runtime.cancel(task_id);
    expect(Date.now() - started).toBeLessThan(2000);
    const p = await rt.runtime.settled(task_id);
    expect(p.final?.stop_reason).toBe('cancelled');
    expect(() => readFileSync(join(temp.dir, 'slow.txt'))).toThrow();
  });

  it('coder and respond steps: the coder role answers, a respond step ends the task with the plan output', async () => {
    const plan = {
      type: 'plan',
      steps: [
        { id: 'code', kind: 'coder', args: { prompt: 'write a haiku about logs' } },
        {
          id: 'say',
          kind: 'respond',
          args: { content: 'coder said: ${steps.code.output}' },
          depends_on: ['code'],
        },
      ],
    };
    await scripted({
      orchestrator: [json(plan)],
      coder: ['append-only, / every step a line / nothing forgotten'],
    });
    const { events, progress } = await run('haiku');
    expect(progress.final).toMatchObject({
      stop_reason: 'completed',
      result: 'coder said: append-only, / every step a line / nothing forgotten',
    });
    const coderCall = events.find((e) => e.type === 'MODEL_CALLED' && e.payload.role === 'coder');
    expect(coderCall?.payload).toMatchObject({ round: 1 });
    expect(progress.usage.rounds).toBe(1);
  });

  it('a coder step with no coder model fails the step, and the orchestrator hears of it', async () => {
    await scripted({
      orchestrator: [
        json({ type: 'plan', steps: [{ id: 'c', kind: 'coder', args: { prompt: 'x' } }] }),
        '{"type":"fail","reason":"no coder"}',
      ],
    });
    const { events } = await run('needs a coder');
    expect(events.find((e) => e.type === 'STEP_FAILED')?.payload).toMatchObject({
      step_id: 'c',
      error: 'no coder model configured',
    });
    const secondContext = events.filter((e) => e.type === 'MODEL_CALLED')[1];
    expect(secondContext).toBeDefined();
  });

  it('a memory step calls memory_search / memory_insert through the registry', async () => {
    const tools = testToolRegistry(temp.dir);
    const seen: unknown[] = [];
    tools.add(manifestOf('memory_insert'), async (a) => (seen.push(['insert', a]), 'stored'));
    tools.add(manifestOf('memory_search'), async (a) => (seen.push(['search', a]), ['hit']));
    const plan = {
      type: 'plan',
      steps: [
        { id: 'put', kind: 'memory', args: { op: 'insert', text: 'the sky is blue' } },
        { id: 'get', kind: 'memory', args: { op: 'search', text: 'sky' }, depends_on: ['put'] },
      ],
    };
    rt = await startTestRuntime({
      store: temp.store,
      tools,
      permissions: new AllowAllPolicy(),
      model: new ScriptedBackend({ orchestrator: [json(plan), '{"type":"respond","content":"ok"}'] }),
    });
    await run('remember and recall');
    expect(seen).toEqual([
      ['insert', { text: 'the sky is blue' }],
      ['search', { query: 'sky' }],
    ]);
  });

  it('a plan step waiting for permission continues after the answer: started once, completed once', async () => {
    const plan = {
      type: 'plan',
      steps: [
        { id: 'free', kind: 'tool', tool: 'echo', args: { text: 'no prompt' } },
        {
          id: 'asked',
          kind: 'tool',
          tool: 'file_read',
          args: { path: 'x.txt' },
          requires_confirmation: true,
          depends_on: ['free'],
        },
      ],
    };
    writeFileSync(join(temp.dir, 'x.txt'), 'content');
    await build(new ScriptedBackend({ orchestrator: [json(plan), '{"type":"respond","content":"done"}'] }));
    const { task_id, progress } = await run('confirm a step');
    expect(progress.status).toBe('awaiting_permission');
    await rt.runtime.resolvePermission(task_id, progress.pendingPermission!.request_id, 'allow_once');
    expect((await rt.runtime.settled(task_id)).final?.stop_reason).toBe('completed');
    const events = await temp.store.readWholeStream(task_id);
    const count = (t: EventType, id: string) =>
      events.filter((e) => e.type === t && (e.payload as { step_id?: string }).step_id === id).length;
    expect([
      count('STEP_STARTED', 'asked'),
      count('STEP_COMPLETED', 'asked'),
      count('STEP_COMPLETED', 'free'),
    ]).toEqual([1, 1, 1]);
  });
});
