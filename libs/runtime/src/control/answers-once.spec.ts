import { IllegalStateError, RuntimeEvent } from '@runledger/contracts';
import { PermissionService } from '@runledger/permissions';
import { ScriptedBackend } from '../model/scripted-backend';
import { TaskProgress } from '../log/progress';
import {
  AllowAllPolicy,
  RuleTablePolicy,
  TestRuntime,
  manifestOf,
  startTestRuntime,
  testToolRegistry,
  useTempStore,
} from '../testing';

/**
 * Two resumes of the same request: exactly one applies, for every kind of answer a waiting task
 * takes (a permission decision, a secret, a timer's firing, a signal's delivery, a client's tool
 * result). Both answers are sent together; one is recorded, the task runs on once and ends once.
 */
const j = (v: unknown) => JSON.stringify(v);
const respond = j({ type: 'respond', content: 'done' });

describe('two answers to one request: exactly one applies', () => {
  const temp = useTempStore('rl-answers-once-', () => rt?.close());
  let rt: TestRuntime;

  async function waitingTask(
    first: string,
    options: { permissions?: PermissionService; ag_ui?: boolean; secretTool?: boolean } = {},
  ): Promise<TaskProgress & { task_id: string }> {
    const tools = testToolRegistry(temp.dir);
    if (options.secretTool)
      tools.add(
        manifestOf('whoami', { description: 'prints the token', secrets: ['API_TOKEN'] }),
        async (_a, ctx) => String(ctx.secrets.get('API_TOKEN')),
      );
    rt = await startTestRuntime({
      store: temp.store,
      tools,
      permissions: options.permissions ?? new AllowAllPolicy(),
      model: new ScriptedBackend({ orchestrator: [first, respond] }),
    });
    const { task_id } = await rt.runtime.submit(
      { input: 'wait for something' },
      {
        source: 'api',
        ...(options.ag_ui
          ? {
              ag_ui: {
                thread_id: 'th',
                run_id: 'run',
                context: [],
                tools: [{ name: 'pick_color', description: 'the user picks a colour' }],
              },
            }
          : {}),
      },
    );
    return rt.runtime.settled(task_id) as Promise<TaskProgress & { task_id: string }>;
  }

  /** both answers settled: which were accepted, which refused as no longer pending */
  async function race(answers: Array<() => Promise<unknown>>) {
    const results = await Promise.allSettled(answers.map((a) => a()));
    const refused = results.filter((r) => r.status === 'rejected');
    for (const r of refused) expect((r as PromiseRejectedResult).reason).toBeInstanceOf(IllegalStateError);
    return results.map((r) => r.status === 'fulfilled');
  }

  async function endsOnce(taskId: string): Promise<RuntimeEvent[]> {
    for (let i = 0; i < 400 && !(await rt.runtime.progress(taskId)).final; i++)
      await new Promise((r) => setTimeout(r, 5));
    const p = await rt.runtime.settled(taskId);
    expect(p.final).toMatchObject({ stop_reason: 'completed', result: 'done' });
    const events = await temp.store.readWholeStream(taskId);
    expect(events.filter((e) => e.type === 'TASK_COMPLETED')).toHaveLength(1);
    expect(events.map((e) => e.sequence)).toEqual(events.map((_, i) => i + 1));
    return events;
  }

  const count = (events: RuntimeEvent[], type: RuntimeEvent['type']) =>
    events.filter((e) => e.type === type).length;

  it('a permission request: one decision recorded, the tool runs once', async () => {
    const p = await waitingTask(j({ type: 'tool', tool: 'echo', args: { text: 'hi' } }), {
      permissions: new RuleTablePolicy({ echo: 'prompt' }),
    });
    expect(p.status).toBe('awaiting_permission');
    const request = p.pendingPermission!.request_id;
    const accepted = await race([
      () => rt.runtime.resolvePermission(p.task_id, request, 'allow_once'),
      () => rt.runtime.resolvePermission(p.task_id, request, 'deny'),
    ]);
    expect(accepted.filter(Boolean)).toHaveLength(1);
    const events = await endsOnce(p.task_id);
    expect(count(events, 'PERMISSION_RESOLVED')).toBe(1);
    const decision = events.find((e) => e.type === 'PERMISSION_RESOLVED')!.payload;
    expect(decision).toMatchObject({ decision: accepted[0] ? 'allow_once' : 'deny' });
    expect(count(events, 'TOOL_CALLED')).toBe(accepted[0] ? 1 : 0);
  });

  it('a secret request: one value recorded, the tool runs once (its output redacted)', async () => {
    const p = await waitingTask(j({ type: 'tool', tool: 'whoami', args: {} }), { secretTool: true });
    expect(p.status).toBe('awaiting_secret');
    const request = p.pendingSecret!.request_id;
    const accepted = await race([
      () => rt.runtime.provideSecret(p.task_id, request, 'first-secret-value'),
      () => rt.runtime.provideSecret(p.task_id, request, 'second-secret-value'),
    ]);
    expect(accepted.filter(Boolean)).toHaveLength(1);
    const events = await endsOnce(p.task_id);
    expect(count(events, 'SECRET_PROVIDED')).toBe(1);
    expect(count(events, 'TOOL_CALLED')).toBe(1);
    // the output is redacted, so what the tool got is told by which value is masked in it
    const output = j(events.find((e) => e.type === 'TOOL_COMPLETED')!.payload);
    expect(output).not.toContain('secret-value');
  });

  it('a timer: fired by two callers at once, TIMER_FIRED once', async () => {
    const p = await waitingTask(j({ type: 'wait', duration_ms: 60_000 }));
    expect(p.status).toBe('waiting');
    const fired = await Promise.all([
      rt.runtime.fireTimer(p.task_id, { early: true }),
      rt.runtime.fireTimer(p.task_id, { early: true }),
    ]);
    expect(fired.filter(Boolean)).toHaveLength(1);
    const events = await endsOnce(p.task_id);
    expect(count(events, 'TIMER_FIRED')).toBe(1);
  });

  it('a wait for a signal: two signals sent at once, one is delivered; the other is kept, or refused once the task ended', async () => {
    const p = await waitingTask(j({ type: 'wait_for_signal', name: 'go' }));
    expect(p.status).toBe('waiting');
    const sent = await Promise.allSettled([
      rt.runtime.sendSignal(p.task_id, { name: 'go', signal_id: 'sig-a', payload: 'a' }),
      rt.runtime.sendSignal(p.task_id, { name: 'go', signal_id: 'sig-b', payload: 'b' }),
    ]);
    const recorded = sent.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    for (const s of sent)
      if (s.status === 'rejected') expect(String(s.reason)).toMatch(/already ended .* it takes no signals/);
    expect(recorded.filter((s) => s.taken_by !== null)).toHaveLength(1);
    const events = await endsOnce(p.task_id);
    expect(count(events, 'SIGNAL_RECEIVED')).toBe(recorded.length);
    expect(count(events, 'SIGNAL_DELIVERED')).toBe(1);
    const delivered = events.find((e) => e.type === 'SIGNAL_DELIVERED')!.payload as { signal_id: string };
    expect(delivered.signal_id).toBe(recorded.find((s) => s.taken_by !== null)!.signal_id);
  });

  it("a client's tool result (AG-UI): one result recorded as the call's outcome", async () => {
    const p = await waitingTask(j({ type: 'tool', tool: 'pick_color', args: {} }), { ag_ui: true });
    expect(p.status).toBe('awaiting_client_tool');
    const [request] = [...p.pendingClientTools.keys()];
    const accepted = await race([
      () => rt.runtime.provideClientToolResult(p.task_id, request, { ok: true, output: 'red' }),
      () => rt.runtime.provideClientToolResult(p.task_id, request, { ok: true, output: 'blue' }),
    ]);
    expect(accepted.filter(Boolean)).toHaveLength(1);
    const events = await endsOnce(p.task_id);
    const outcomes = events.filter((e) => e.type === 'TOOL_COMPLETED' || e.type === 'TOOL_FAILED');
    expect(outcomes).toHaveLength(1);
    expect(outcomes[0].payload).toMatchObject({
      request_id: request,
      result: { output: accepted[0] ? 'red' : 'blue' },
    });
  });
});
