import { HttpAgent } from '@ag-ui/client';
import type { BaseEvent, Interrupt, Message, RunAgentInput, Tool } from '@ag-ui/core';
import { EventSchema } from '@ag-ui/core/schemas';
import { RuntimeEvent } from '@runledger/contracts';
import { RuntimeController, replayView } from '@runledger/runtime';
import { FakeOpenAiServer, startFakeOpenAiServer } from '@runledger/testing';
import { ApiHarness, bootApi } from './api-harness';
import { agentFor, post } from './ag-ui-client';

/**
 * AG-UI frontend tools end to end: HttpAgent offers a tool, our orchestrator (the openai backend
 * against the local fake OpenAI server) calls it, the run ends with an interrupt carrying the call,
 * and the resume entry with the tool's result continues the same task.
 */

jest.setTimeout(60_000);

const SET_THEME: Tool = {
  name: 'setThemeColor',
  description: "Change the page's theme color",
  parameters: {
    type: 'object',
    properties: { color: { type: 'string', enum: ['teal', 'plum'] } },
    required: ['color'],
  },
};

type Wire = { role: string; content?: string | null; tool_call_id?: string; tool_calls?: { id: string }[] };

async function logOf(h: ApiHarness, taskId: string): Promise<RuntimeEvent[]> {
  return (await h.request('GET', `/tasks/${taskId}/events?limit=1000`)).body.events as RuntimeEvent[];
}

async function onlyTask(h: ApiHarness, threadId: string): Promise<string> {
  const tasks = (await h.request('GET', `/tasks?session_id=${threadId}`)).body.tasks as { task_id: string }[];
  expect(tasks).toHaveLength(1);
  return tasks[0].task_id;
}

/** One run through HttpAgent: the events it saw (each checked against @ag-ui/core's schema) and how it ended. */
async function run(
  agent: HttpAgent,
  params: Parameters<HttpAgent['runAgent']>[0],
): Promise<{ events: BaseEvent[]; outcome?: string; interrupts: Interrupt[] }> {
  const events: BaseEvent[] = [];
  let outcome: string | undefined;
  let interrupts: Interrupt[] = [];
  await agent.runAgent(params, {
    onEvent: ({ event }) => void events.push(event),
    onRunFinishedEvent: (p) => {
      outcome = p.outcome;
      if (p.outcome === 'interrupt') interrupts = p.interrupts;
    },
  });
  for (const event of events) expect(EventSchema.safeParse(event).error).toBeUndefined();
  return { events, outcome, interrupts };
}

describe('AG-UI frontend tools through HttpAgent (e2e, openai backend on the fake server)', () => {
  let model: FakeOpenAiServer;
  let sut: ApiHarness;
  beforeAll(async () => {
    model = await startFakeOpenAiServer({ apiKey: 'test-key' });
    sut = await bootApi(
      {
        RUNLEDGER_MODEL: 'openai',
        OPENAI_BASE_URL: model.baseURL,
        OPENAI_API_KEY: 'test-key',
        RUNLEDGER_MODEL_ORCHESTRATOR: 'tool-model',
        RUNLEDGER_CRITIC: 'off',
      },
      { checkResponses: true },
    );
  });
  afterAll(async () => {
    await sut.close();
    await model.close();
  });
  beforeEach(() => {
    model.requests.length = 0;
  });

  it('the offered tool reaches the model; its call ends the run with an interrupt carrying it; the result resumes the same task; replay uses it', async () => {
    model.enqueue(
      { tool_calls: [{ id: 'fc_1', name: 'setThemeColor', arguments: '{"color":"teal"}' }] },
      { content: 'The theme is teal now.' },
    );
    const agent = agentFor(sut, 'thread-theme');
    agent.addMessage({ id: 'u1', role: 'user', content: 'make it teal' });
    const first = await run(agent, { runId: 'run-theme-1', tools: [SET_THEME] });

    // offered natively, with the frontend's schema, beside the server's own tools
    const [ask] = model.requests.filter((r) => r.path === '/v1/chat/completions');
    const offered = (ask.body.tools as { function: { name: string; parameters: unknown } }[]).map(
      (t) => t.function,
    );
    expect(offered).toContainEqual({
      name: 'setThemeColor',
      description: SET_THEME.description,
      parameters: SET_THEME.parameters,
    });
    expect(offered.map((f) => f.name)).toContain('file_read');

    // the call is shown, then the run ends on it
    expect(first.outcome).toBe('interrupt');
    const start = first.events.find((e) => e.type === 'TOOL_CALL_START') as unknown as {
      toolCallId: string;
      toolCallName: string;
    };
    expect(start.toolCallName).toBe('setThemeColor');
    expect(first.interrupts).toHaveLength(1);
    const [interrupt] = first.interrupts;
    expect(interrupt).toMatchObject({
      reason: 'tool_call',
      toolCallId: start.toolCallId,
      metadata: { kind: 'client_tool', name: 'setThemeColor', args: { color: 'teal' } },
    });
    expect(agent.pendingInterrupts.map((i) => i.id)).toEqual([interrupt.id]);
    // the frontend's message list holds the call, under that id
    expect(agent.messages.flatMap((m) => (m.role === 'assistant' ? (m.toolCalls ?? []) : []))).toEqual([
      expect.objectContaining({
        id: start.toolCallId,
        function: { name: 'setThemeColor', arguments: '{"color":"teal"}' },
      }),
    ]);
    const taskId = await onlyTask(sut, 'thread-theme');
    expect((await sut.request('GET', `/tasks/${taskId}`)).body).toMatchObject({
      status: 'awaiting_client_tool',
      pending: [{ kind: 'client_tool', tool: 'setThemeColor', args: { color: 'teal' } }],
    });

    // the frontend ran it and resumes with its result
    const second = await run(agent, {
      runId: 'run-theme-2',
      tools: [SET_THEME],
      resume: [{ interruptId: interrupt.id, status: 'resolved', payload: { result: { applied: 'teal' } } }],
    });
    expect(second.outcome).toBe('success');
    expect(second.events.at(-1)).toMatchObject({ type: 'RUN_FINISHED', result: 'The theme is teal now.' });
    expect(agent.messages.at(-1)).toMatchObject({ role: 'assistant', content: 'The theme is teal now.' });
    // the thread as the log holds it: the user's message, the call, the frontend's result under it, the answer
    const snapshot = second.events.find((e) => e.type === 'MESSAGES_SNAPSHOT') as unknown as {
      messages: Message[];
    };
    expect(agent.messages).toEqual(snapshot.messages);
    expect(agent.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    expect(agent.messages[2]).toMatchObject({ toolCallId: start.toolCallId, content: '{"applied":"teal"}' });
    expect(await onlyTask(sut, 'thread-theme')).toBe(taskId);

    // the model got the result as the call's tool turn
    const [, answer] = model.requests.filter((r) => r.path === '/v1/chat/completions');
    const turns = answer.body.messages as Wire[];
    const toolTurn = turns.find((m) => m.role === 'tool');
    expect(toolTurn?.content).toContain('"applied":"teal"');
    const callTurn = turns.find((m) => m.tool_calls?.length);
    expect(callTurn?.tool_calls?.[0].id).toBe(toolTurn?.tool_call_id);

    // in the log: intent, the wait, the client's result as the call's outcome naming the request
    // (a checkpoint the wait was saved at may lie between)
    const log = (await logOf(sut, taskId)).filter((e) => e.type !== 'CHECKPOINT_SAVED');
    const types = log.map((e) => e.type);
    const called = types.indexOf('TOOL_CALLED');
    expect(types.slice(called, called + 3)).toEqual([
      'TOOL_CALLED',
      'TASK_AWAITING_CLIENT_TOOL',
      'TOOL_COMPLETED',
    ]);
    const asked = log[called + 1] as RuntimeEvent<'TASK_AWAITING_CLIENT_TOOL'>;
    expect(log[called + 2].payload).toMatchObject({
      tool: 'setThemeColor',
      request_id: asked.payload.request_id,
      result: { ok: true, output: { applied: 'teal' } },
    });
    expect(interrupt.id).toBe(`${taskId}/${asked.payload.request_id}`);
    // the call lasted from its question to the client's answer (the interrupted run alone settles 100 ms)
    const answeredAt = log[called + 2] as RuntimeEvent<'TOOL_COMPLETED'>;
    expect(answeredAt.payload.duration_ms).toBeGreaterThanOrEqual(100);
    expect(answeredAt.payload.duration_ms).toBeLessThanOrEqual(
      Date.parse(answeredAt.created_at) - Date.parse(asked.created_at),
    );
    expect(types.at(-1)).toBe('TASK_COMPLETED');

    // the same resume sent again streams the same run and records nothing more
    const again = await run(agentFor(sut, 'thread-theme'), {
      runId: 'run-theme-2',
      tools: [SET_THEME],
      resume: [{ interruptId: interrupt.id, status: 'resolved', payload: { result: { applied: 'teal' } } }],
    });
    expect(again.events.map((e) => e.type)).toEqual(second.events.map((e) => e.type));
    expect((await logOf(sut, taskId)).filter((e) => e.type !== 'CHECKPOINT_SAVED')).toHaveLength(log.length);

    // replayed offline: the recorded result answers the call, and the replay matches
    const calls = model.requests.length;
    const replay = await sut.app.get(RuntimeController).replay(taskId);
    expect(model.requests).toHaveLength(calls);
    expect(replay.progress.final).toMatchObject({
      stop_reason: 'completed',
      result: 'The theme is teal now.',
    });
    expect(replayView(replay.events)).toEqual(replayView(await logOf(sut, taskId)));
  });

  it("an error or a cancelled interrupt is the call's TOOL_FAILED and the task goes on; arguments off the schema never reach the client", async () => {
    model.enqueue(
      { tool_calls: [{ id: 'fc_2', name: 'setThemeColor', arguments: '{"color":"neon"}' }] },
      { tool_calls: [{ id: 'fc_3', name: 'setThemeColor', arguments: '{"color":"plum"}' }] },
      { tool_calls: [{ id: 'fc_4', name: 'setThemeColor', arguments: '{"color":"teal"}' }] },
      { content: 'Could not change the theme.' },
    );
    const agent = agentFor(sut, 'thread-fail');
    agent.addMessage({ id: 'u1', role: 'user', content: 'make it neon' });
    // the first call's arguments are off the offered schema: the model is corrected before the client sees it
    const first = await run(agent, { runId: 'run-fail-1', tools: [SET_THEME] });
    expect(first.outcome).toBe('interrupt');
    expect(first.interrupts).toHaveLength(1);
    expect(first.interrupts[0].metadata).toMatchObject({ args: { color: 'plum' } });
    const second = await run(agent, {
      runId: 'run-fail-2',
      tools: [SET_THEME],
      resume: [
        { interruptId: first.interrupts[0].id, status: 'resolved', payload: { error: 'the page is locked' } },
      ],
    });
    expect(second.outcome).toBe('interrupt');
    expect(second.interrupts[0].metadata).toMatchObject({ args: { color: 'teal' } });
    const third = await run(agent, {
      runId: 'run-fail-3',
      tools: [SET_THEME],
      resume: [{ interruptId: second.interrupts[0].id, status: 'cancelled' }],
    });
    expect(third.outcome).toBe('success');

    const taskId = await onlyTask(sut, 'thread-fail');
    const log = await logOf(sut, taskId);
    expect(log.find((e) => e.type === 'GUARD_TRIGGERED')?.payload).toMatchObject({
      guard: 'correction',
      detail: expect.stringContaining('args/color must be equal to one of the allowed values'),
    });
    expect(log.filter((e) => e.type === 'TASK_AWAITING_CLIENT_TOOL')).toHaveLength(2);
    const outcomes = log.filter((e) => e.type === 'TOOL_FAILED' || e.type === 'TOOL_COMPLETED');
    expect(outcomes.map((e) => e.payload)).toEqual([
      expect.objectContaining({
        error: 'the page is locked',
        error_kind: 'tool_error',
        request_id: expect.any(String),
      }),
      expect.objectContaining({ error_kind: 'tool_error', request_id: expect.any(String) }),
    ]);
    expect(outcomes[1].payload).toMatchObject({ error: expect.stringContaining('cancelled') });
  });

  it('bad offered tools and bad results are 400 writing nothing; an answered call is not answered twice', async () => {
    const base = (runId: string, tools: Tool[]): RunAgentInput => ({
      threadId: 'thread-bad',
      runId,
      messages: [{ id: `${runId}-u`, role: 'user', content: 'hi' }],
      tools,
      context: [],
      state: {},
    });
    const bad: [Tool[], string][] = [
      [[{ ...SET_THEME, name: 'set theme' }], 'letters, digits'],
      [[{ ...SET_THEME, name: 'file_read' }], 'tool of this server'],
      [[{ ...SET_THEME, name: 'runledger_plan' }], "runtime's"],
      [[SET_THEME, SET_THEME], 'offered twice'],
      [[{ ...SET_THEME, parameters: { type: 'object', properties: { a: { type: 12 } } } }], 'JSON Schema'],
    ];
    for (const [tools, why] of bad) {
      const res = await post(sut, base(`run-bad-${why}`, tools));
      expect(res.status).toBe(400);
      expect(JSON.parse(res.text)).toMatchObject({
        error: expect.any(String),
        message: expect.stringContaining(why),
      });
    }
    expect((await sut.request('GET', '/tasks?session_id=thread-bad')).body.tasks).toHaveLength(0);

    model.enqueue(
      { tool_calls: [{ id: 'fc_5', name: 'setThemeColor', arguments: '{"color":"plum"}' }] },
      { content: 'Plum it is.' },
    );
    const agent = agentFor(sut, 'thread-answer');
    agent.addMessage({ id: 'u1', role: 'user', content: 'plum please' });
    const first = await run(agent, { runId: 'run-answer-1', tools: [SET_THEME] });
    const [interrupt] = first.interrupts;
    const taskId = await onlyTask(sut, 'thread-answer');
    const before = (await logOf(sut, taskId)).length;
    const resume = (payload: unknown): RunAgentInput => ({
      ...base('run-answer-2', [SET_THEME]),
      threadId: 'thread-answer',
      resume: [{ interruptId: interrupt.id, status: 'resolved', payload }],
    });
    for (const payload of [undefined, {}, { result: 1, error: 'x' }, { error: '' }, 'teal']) {
      const res = await post(sut, resume(payload));
      expect(res.status).toBe(400);
      expect(JSON.parse(res.text).message).toContain('payload');
    }
    expect(await logOf(sut, taskId)).toHaveLength(before);
    // answered through HttpAgent; the client's result is recorded once
    const second = await run(agent, {
      runId: 'run-answer-2',
      tools: [SET_THEME],
      resume: [{ interruptId: interrupt.id, status: 'resolved', payload: { result: 'done' } }],
    });
    expect(second.outcome).toBe('success');
    const answered = (await logOf(sut, taskId)).filter(
      (e) => e.type === 'TOOL_COMPLETED' && e.payload.request_id !== undefined,
    );
    expect(answered).toHaveLength(1);
    await expect(
      sut.app
        .get(RuntimeController)
        .provideClientToolResult(taskId, interrupt.id.split('/')[1], { ok: true, output: 'again' }),
    ).rejects.toThrow('not pending');
  });

  it("a reply's reasoning (reasoning_content) streams live as REASONING events from REASONING_CHUNK, is recorded whole on MODEL_RESPONDED, and replayed", async () => {
    const thought = 'The user greets; greet back briefly.';
    model.enqueue({ reasoning: thought, content: 'Hi there.' });
    const agent = agentFor(sut, 'thread-reason');
    agent.addMessage({ id: 'u1', role: 'user', content: 'hello' });
    const { events, outcome } = await run(agent, { runId: 'run-reason-1' });
    expect(outcome).toBe('success');
    const reasoning = events.filter((e) => e.type.startsWith('REASONING'));
    const pieces = reasoning.filter((e) => e.type === 'REASONING_MESSAGE_CONTENT') as unknown as {
      delta: string;
    }[];
    // the fake server streams it in pieces of 8 characters: each is shown as it came
    expect(pieces.length).toBe(Math.ceil(thought.length / 8));
    expect(pieces.map((p) => p.delta).join('')).toBe(thought);
    expect(reasoning.map((e) => e.type)).toEqual([
      'REASONING_START',
      'REASONING_MESSAGE_START',
      ...pieces.map(() => 'REASONING_MESSAGE_CONTENT'),
      'REASONING_MESSAGE_END',
      'REASONING_END',
    ]);
    // before the reply's text
    const types: string[] = events.map((e) => e.type);
    expect(types.indexOf('REASONING_END')).toBeLessThan(types.indexOf('TEXT_MESSAGE_START'));
    expect(agent.messages).toContainEqual(expect.objectContaining({ role: 'reasoning', content: thought }));
    const taskId = await onlyTask(sut, 'thread-reason');
    const log = await logOf(sut, taskId);
    expect(log.find((e) => e.type === 'MODEL_RESPONDED')?.payload).toMatchObject({
      content: 'Hi there.',
      reasoning: thought,
    });
    // recorded piece by piece while the model streamed, before its reply was recorded
    const chunks = log.filter((e) => e.type === 'REASONING_CHUNK');
    expect(chunks.map((e) => (e.payload as { delta: string }).delta)).toEqual(pieces.map((p) => p.delta));
    expect(chunks.at(-1)!.sequence).toBeLessThan(log.find((e) => e.type === 'MODEL_RESPONDED')!.sequence);
    const replay = await sut.app.get(RuntimeController).replay(taskId);
    expect(replayView(replay.events)).toEqual(replayView(log));
  });

  it('answered every request above as the OpenAPI document describes it', () => {
    expect(sut.responseMismatches).toEqual([]);
  });
});
