import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BaseEvent, Interrupt, Message, RunAgentInput } from '@ag-ui/core';
import { EventSchema } from '@ag-ui/core/schemas';
import { ApiHarness, TOKENS, bootApi, eventCount, waitForTask } from './api-harness';
import { SseEvent, agentFor, post } from './ag-ui-client';

jest.setTimeout(60_000);

/** Orchestrator replies (JSON directives): every task of a server gets them from the first. */
function scripted(dir: string, orchestrator: unknown[]): Record<string, string> {
  const file = join(dir, 'script.json');
  writeFileSync(file, JSON.stringify({ orchestrator: orchestrator.map((d) => JSON.stringify(d)) }));
  return { RUNLEDGER_MODEL: `scripted:${file}` };
}

/** Every event is one @ag-ui/core's schema accepts, its SSE `event:` its type. */
function expectValid(events: { event: unknown; type?: string }[]): void {
  for (const e of events) {
    const parsed = EventSchema.safeParse(e.event);
    expect(parsed.error).toBeUndefined();
    if (e.type !== undefined) expect(e.type).toBe((e.event as BaseEvent).type);
  }
}

const input = (threadId: string, runId: string, text: string): RunAgentInput => ({
  threadId,
  runId,
  messages: [{ id: `${runId}-u`, role: 'user', content: text }],
  tools: [],
  context: [{ description: 'the page the user is on', value: 'settings' }],
  forwardedProps: { locale: 'en' },
  state: {},
});

async function taskEvents(h: ApiHarness, taskId: string) {
  return (await h.request('GET', `/tasks/${taskId}/events?limit=1000`)).body.events as {
    type: string;
    session_id: string;
    payload: Record<string, unknown>;
  }[];
}

describe('POST /ag-ui with the AG-UI client (e2e)', () => {
  let dir: string;
  let sut: ApiHarness;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rl-agui-'));
    sut = await bootApi(scripted(dir, [{ type: 'respond', content: 'Hello from the ledger' }]), {
      checkResponses: true,
    });
  });
  afterAll(async () => {
    await sut.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs to success through HttpAgent: valid events in the order the client enforces, the answer as a message, the input recorded', async () => {
    const agent = agentFor(sut, 'thread-ok');
    agent.addMessage({ id: 'm1', role: 'user', content: 'greet me' });
    const seen: BaseEvent[] = [];
    let outcome: string | undefined;
    await agent.runAgent(
      {
        runId: 'run-ok-1',
        context: [{ description: 'the page the user is on', value: 'settings' }],
        forwardedProps: { locale: 'en' },
      },
      {
        onEvent: ({ event }) => void seen.push(event),
        onRunFinishedEvent: (p) => void (outcome = p.outcome),
      },
    );
    expectValid(seen.map((event) => ({ event })));
    expect(seen[0].type).toBe('RUN_STARTED');
    expect(seen.at(-1)).toMatchObject({
      type: 'RUN_FINISHED',
      outcome: { type: 'success' },
      result: 'Hello from the ledger',
    });
    expect(outcome).toBe('success');
    expect(agent.messages.at(-1)).toMatchObject({ role: 'assistant', content: 'Hello from the ledger' });
    expect(seen.some((e) => e.type === 'STATE_SNAPSHOT')).toBe(true);

    const tasks = (await sut.request('GET', '/tasks?session_id=thread-ok')).body.tasks;
    expect(tasks).toHaveLength(1);
    expect(tasks[0]).toMatchObject({ status: 'completed', session_id: 'thread-ok' });
    const [received] = await taskEvents(sut, tasks[0].task_id);
    expect(received.payload).toMatchObject({
      input: 'greet me',
      session_id: 'thread-ok',
      ag_ui: {
        thread_id: 'thread-ok',
        run_id: 'run-ok-1',
        context: [{ description: 'the page the user is on', value: 'settings' }],
        forwarded_props: { locale: 'en' },
        tools: [],
      },
    });
  });

  it("ends each run with MESSAGES_SNAPSHOT of the thread from the log: HttpAgent's list after the run is exactly it, across runs and for a fresh client", async () => {
    const snapshotIn = (events: BaseEvent[]) =>
      (events.find((e) => e.type === 'MESSAGES_SNAPSHOT') as unknown as { messages: Message[] }).messages;
    const runOnce = async (agent: ReturnType<typeof agentFor>, runId: string) => {
      const seen: BaseEvent[] = [];
      await agent.runAgent({ runId }, { onEvent: ({ event }) => void seen.push(event) });
      expectValid(seen.map((event) => ({ event })));
      expect(seen.at(-2)!.type).toBe('MESSAGES_SNAPSHOT');
      return seen;
    };
    const agent = agentFor(sut, 'thread-snap');
    agent.addMessage({ id: 'snap-u1', role: 'user', content: '  greet me, with spaces kept  ' });
    const first = await runOnce(agent, 'run-snap-1');
    expect(agent.messages).toEqual(snapshotIn(first));
    expect(agent.messages).toEqual([
      { id: 'snap-u1', role: 'user', content: '  greet me, with spaces kept  ' },
      expect.objectContaining({ role: 'assistant', content: 'Hello from the ledger' }),
    ]);

    agent.addMessage({ id: 'snap-u2', role: 'user', content: 'again' });
    const second = await runOnce(agent, 'run-snap-2');
    expect(agent.messages).toEqual(snapshotIn(second));
    expect(agent.messages.map((m) => m.id)).toEqual([
      'snap-u1',
      agent.messages[1].id,
      'snap-u2',
      agent.messages[3].id,
    ]);

    // a page reloaded: a client holding only its new message gets the whole thread (the snapshot in
    // thread order; the client's merge rule keeps the messages it held where they were)
    const fresh = agentFor(sut, 'thread-snap');
    fresh.addMessage({ id: 'snap-u3', role: 'user', content: 'once more' });
    const third = await runOnce(fresh, 'run-snap-3');
    const snapshot = snapshotIn(third);
    expect(snapshot.slice(0, 4)).toEqual(agent.messages);
    expect(snapshot.map((m) => m.id).slice(4, 5)).toEqual(['snap-u3']);
    expect(snapshot.map((m) => m.role)).toEqual([
      'user',
      'assistant',
      'user',
      'assistant',
      'user',
      'assistant',
    ]);
    const byId = (a: Message, b: Message) => a.id.localeCompare(b.id);
    expect([...fresh.messages].sort(byId)).toEqual([...snapshot].sort(byId));

    // the same run streamed again (a reconnect) ends with the same snapshot: it is the log's
    const again = await post(sut, {
      threadId: 'thread-snap',
      runId: 'run-snap-1',
      messages: [{ id: 'snap-u1', role: 'user', content: '  greet me, with spaces kept  ' }],
      tools: [],
      context: [],
      forwardedProps: {},
      state: {},
    });
    expect(snapshotIn(again.events.map((e) => e.event))).toEqual(snapshotIn(first));
  });

  it('a runId sent twice streams the one task it started; with another body it is refused (409)', async () => {
    const body = input('thread-twice', 'run-twice', 'greet me twice');
    const first = await post(sut, body);
    const second = await post(sut, body);
    expect(first.status).toBe(200);
    expectValid(first.events);
    expect(second.events).toEqual(first.events);
    expect((await sut.request('GET', '/tasks?session_id=thread-twice')).body.tasks).toHaveLength(1);

    const before = await eventCount(sut);
    const other = await post(sut, input('thread-twice', 'run-twice', 'something else'));
    expect(other.status).toBe(409);
    expect(JSON.parse(other.text)).toMatchObject({ error: expect.any(String), message: expect.any(String) });
    expect(await eventCount(sut)).toBe(before);
  });

  it('refuses a bad body with a 400 JSON error and writes nothing; needs a tasks:write token', async () => {
    const before = await eventCount(sut);
    const bad = await post(sut, { threadId: 't', messages: 'not a list' });
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.text)).toMatchObject({
      error: 'validation_error',
      message: expect.stringContaining('body'),
    });
    const noUser = await post(sut, {
      ...input('t', 'r', 'x'),
      messages: [{ id: 'a', role: 'assistant', content: 'hi' }],
    });
    expect(noUser.status).toBe(400);
    const badResume = await post(sut, {
      ...input('t', 'r2', 'x'),
      resume: [{ interruptId: 'not ours', status: 'resolved' }],
    });
    expect(badResume.status).toBe(400);
    const badCursor = await post(sut, input('t', 'r3', 'x'), { 'Last-Event-ID': '12' });
    expect(badCursor.status).toBe(400);
    expect(await eventCount(sut)).toBe(before);

    const reader = await sut.request('POST', '/ag-ui', { token: TOKENS.reader, body: input('t', 'r4', 'x') });
    expect(reader.status).toBe(403);
    const anonymous = await sut.request('POST', '/ag-ui', { token: null, body: input('t', 'r5', 'x') });
    expect(anonymous.status).toBe(401);
  });

  it('answered every request above as the OpenAPI document describes it', () => {
    expect(sut.responseMismatches).toEqual([]);
  });
});

describe('POST /ag-ui: interrupts and resume (e2e)', () => {
  let dir: string;
  let sut: ApiHarness;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rl-agui-perm-'));
    sut = await bootApi(
      scripted(dir, [
        { type: 'tool', tool: 'shell_exec', args: { command: 'echo approved > approved.txt' } },
        { type: 'respond', content: 'wrote approved.txt' },
      ]),
      { checkResponses: true },
    );
  });
  afterAll(async () => {
    await sut.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a run that needs permission ends with an interrupt; resuming it with allow_once continues the same task to success', async () => {
    const agent = agentFor(sut, 'thread-perm');
    agent.addMessage({ id: 'm1', role: 'user', content: 'write the file' });
    const first: BaseEvent[] = [];
    let interrupts: Interrupt[] = [];
    await agent.runAgent(
      { runId: 'run-perm-1' },
      {
        onEvent: ({ event }) => void first.push(event),
        onRunFinishedEvent: (p) => void (interrupts = p.outcome === 'interrupt' ? p.interrupts : []),
      },
    );
    expectValid(first.map((event) => ({ event })));
    expect(interrupts).toHaveLength(1);
    const [task] = (await sut.request('GET', '/tasks?session_id=thread-perm')).body.tasks;
    expect(task.status).toBe('awaiting_permission');
    const pending = task.pending[0];
    expect(interrupts[0]).toMatchObject({
      id: `${task.task_id}/${pending.request_id}`,
      reason: 'permission_required',
      metadata: { kind: 'permission', tool: 'shell_exec', args: { command: 'echo approved > approved.txt' } },
    });
    expect(interrupts[0].metadata?.covers).toEqual(expect.any(String));
    expect(agent.pendingInterrupts).toHaveLength(1);
    expect(existsSync(join(sut.workspace, 'approved.txt'))).toBe(false);

    const second: BaseEvent[] = [];
    let outcome: string | undefined;
    await agent.runAgent(
      {
        runId: 'run-perm-2',
        resume: [{ interruptId: interrupts[0].id, status: 'resolved', payload: { decision: 'allow_once' } }],
      },
      {
        onEvent: ({ event }) => void second.push(event),
        onRunFinishedEvent: (p) => void (outcome = p.outcome),
      },
    );
    expectValid(second.map((event) => ({ event })));
    expect(outcome).toBe('success');
    expect(second.map((e) => e.type)).toEqual(
      expect.arrayContaining([
        'RUN_STARTED',
        'TOOL_CALL_START',
        'TOOL_CALL_ARGS',
        'TOOL_CALL_END',
        'TOOL_CALL_RESULT',
        'RUN_FINISHED',
      ]),
    );
    expect(readFileSync(join(sut.workspace, 'approved.txt'), 'utf8')).toBe('approved\n');
    const done = await waitForTask(sut, task.task_id);
    expect(done.status).toBe('completed');
    // the same task continued: one task in the thread, the answer recorded like any other
    expect((await sut.request('GET', '/tasks?session_id=thread-perm')).body.tasks).toHaveLength(1);
    const log = await taskEvents(sut, task.task_id);
    expect(log.find((e) => e.type === 'PERMISSION_RESOLVED')?.payload).toMatchObject({
      request_id: pending.request_id,
      decision: 'allow_once',
    });
    expect(log.filter((e) => e.type === 'TASK_RECEIVED')).toHaveLength(1);

    // the resume sent again (a reconnect) answers nothing twice and streams the same run
    const again = await post(sut, {
      ...input('thread-perm', 'run-perm-2', 'write the file'),
      resume: [{ interruptId: interrupts[0].id, status: 'resolved', payload: { decision: 'allow_once' } }],
    });
    expect(again.status).toBe(200);
    expect(again.events.map((e) => e.event)).toEqual(second);
    expect(
      (await taskEvents(sut, task.task_id)).filter((e) => e.type === 'PERMISSION_RESOLVED'),
    ).toHaveLength(1);
  });

  it('a resume entry with a payload that is not a decision is refused (400) and answers nothing', async () => {
    const first = await post(sut, input('thread-bad-resume', 'run-br-1', 'write the file'));
    const finished = first.events.at(-1)!.event as unknown as { outcome: { interrupts: Interrupt[] } };
    const [interrupt] = finished.outcome.interrupts;
    const before = await eventCount(sut);
    const res = await post(sut, {
      ...input('thread-bad-resume', 'run-br-2', 'write the file'),
      resume: [{ interruptId: interrupt.id, status: 'resolved', payload: { decision: 'sure' } }],
    });
    expect(res.status).toBe(400);
    expect(await eventCount(sut)).toBe(before);
    const other = await post(sut, {
      ...input('another-thread', 'run-br-3', 'write the file'),
      resume: [{ interruptId: interrupt.id, status: 'resolved', payload: { decision: 'allow_once' } }],
    });
    expect(other.status).toBe(400);
    expect(await eventCount(sut)).toBe(before);
  });

  it('answered every request above as the OpenAPI document describes it', () => {
    expect(sut.responseMismatches).toEqual([]);
  });
});

describe('POST /ag-ui: Last-Event-ID reconnects (e2e)', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'rl-agui-reconnect-'));
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('resumes after any event with no gap and no duplicate, also after a restart on the same SQLite file', async () => {
    const env = {
      ...scripted(dir, [{ type: 'respond', content: 'Hello from the ledger' }]),
      RUNLEDGER_DB: join(dir, 'runledger.db'),
    };
    const body = input('thread-reconnect', 'run-reconnect', 'greet me');
    let sut = await bootApi(env, { checkResponses: true });
    let full: SseEvent[];
    try {
      full = (await post(sut, body)).events;
      expectValid(full);
      expect(full.at(-1)!.type).toBe('RUN_FINISHED');
      expect(new Set(full.map((e) => e.id)).size).toBe(full.length);
      for (let cut = 0; cut < full.length - 1; cut++) {
        const rest = await post(sut, body, { 'Last-Event-ID': full[cut].id });
        expect(rest.events).toEqual(full.slice(cut + 1));
      }
      expect(sut.responseMismatches).toEqual([]);
    } finally {
      await sut.close();
    }
    sut = await bootApi(env, { checkResponses: true });
    try {
      const cut = Math.floor(full.length / 2);
      const rest = await post(sut, body, { 'Last-Event-ID': full[cut].id });
      expect(rest.status).toBe(200);
      expect(rest.events).toEqual(full.slice(cut + 1));
      expect((await sut.request('GET', '/tasks?session_id=thread-reconnect')).body.tasks).toHaveLength(1);
      expect(sut.responseMismatches).toEqual([]);
    } finally {
      await sut.close();
    }
  });
});
