import { EventSchema } from '@ag-ui/core/schemas';
import type { BaseEvent } from '@ag-ui/core';
import { HttpAgent, defaultApplyEvents, verifyEvents } from '@ag-ui/client';
import type { Message, RunAgentInput } from '@ag-ui/core';
import { from } from 'rxjs';
import { EventType, RuntimeEvent, emptyUsage, parseEventBody } from '@runledger/contracts';
import {
  AgUiEmitted,
  AgUiRunFrame,
  finishParked,
  isAfter,
  mapEvent,
  messagesOfTask,
  openRun,
  parseEventId,
  parseInterruptId,
} from './ag-ui-events';

const TASK = 'task_1';
let position = 0;
function ev(sequence: number, type: EventType, payload: unknown): RuntimeEvent {
  const body = parseEventBody({ type, payload });
  return {
    event_id: `evt_${sequence}`,
    task_id: TASK,
    session_id: 'thread-1',
    sequence,
    position: ++position,
    type: body.type,
    payload: body.payload,
    causation_id: null,
    correlation_id: 'corr',
    created_at: new Date(1_700_000_000_000 + sequence).toISOString(),
  } as RuntimeEvent;
}
const usage = (prompt: number, completion: number) => ({
  ...emptyUsage(),
  rounds: 1,
  model_calls: 1,
  prompt_tokens: prompt,
  completion_tokens: completion,
  total_tokens: prompt + completion,
});
const tokens = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };

/** Runs a frame over a log the way the endpoint does: open, each event, then the parked check. */
function run(
  frame: AgUiRunFrame,
  log: RuntimeEvent[],
  parkedAtEnd = true,
  thread: Message[] = [],
): AgUiEmitted[] {
  let step = openRun(
    frame,
    log.filter((e) => e.sequence <= frame.after),
    thread,
  );
  const out = [...step.out];
  for (const e of log) {
    step = mapEvent(step.state, e);
    out.push(...step.out);
  }
  if (parkedAtEnd) out.push(...finishParked(step.state).out);
  return out;
}
const types = (out: AgUiEmitted[]): string[] => out.map((o) => o.event.type);
/** The AG-UI client's own order rules (its 1.0 verifier, on its own rxjs), over the events as sent: how many passed. */
const verified = (out: AgUiEmitted[]) =>
  new Promise<AgUiEmitted[]>((resolve, reject) => {
    const verify = verifyEvents(false);
    const passed: AgUiEmitted[] = [];
    verify(from(out.map((o) => o.event as BaseEvent)) as unknown as Parameters<typeof verify>[0]).subscribe({
      next: (e) => passed.push(out.find((o) => o.event === e)!),
      error: reject,
      complete: () => resolve(passed),
    });
  });

const answered = [
  ev(1, 'TASK_RECEIVED', { input: 'say hi', session_id: 'thread-1' }),
  ev(2, 'MODEL_CALLED', {
    call_id: 'call_m1',
    role: 'orchestrator',
    model: 'm',
    backend: 'scripted',
    prompt_chars: 10,
  }),
  ev(3, 'OUTPUT_CHUNK', { call_id: 'call_m1', index: 0, delta: 'Hel' }),
  ev(4, 'OUTPUT_CHUNK', { call_id: 'call_m1', index: 1, delta: 'lo' }),
  ev(5, 'MODEL_RESPONDED', {
    call_id: 'call_m1',
    role: 'orchestrator',
    model: 'm',
    content: '{"type":"respond","content":"Hello"}',
    usage: tokens,
    latency_ms: 3,
  }),
  ev(6, 'ROUTER_DECIDED', {
    round: 1,
    directive: { type: 'respond', content: 'Hello' },
    source: 'orchestrator',
  }),
  ev(7, 'TASK_COMPLETED', {
    stop_reason: 'completed',
    detail: 'answered',
    usage: usage(10, 5),
    result: 'Hello',
  }),
];

const permissionLog = [
  ev(1, 'TASK_RECEIVED', { input: 'run touch x', session_id: 'thread-1' }),
  ev(2, 'ROUTER_DECIDED', {
    round: 1,
    directive: {
      type: 'plan',
      steps: [
        {
          id: 's1',
          kind: 'tool',
          tool: 'shell_exec',
          args: { command: 'touch x' },
          description: 'touch',
          requires_confirmation: false,
          depends_on: [],
        },
      ],
    },
    source: 'sys_util',
  }),
  ev(3, 'STEP_STARTED', { plan_id: 'plan_1', step_id: 's1', kind: 'tool' }),
  ev(4, 'TASK_AWAITING_PERMISSION', {
    request_id: 'perm_1',
    call_id: 'call_t1',
    tool: 'shell_exec',
    args: { command: 'touch x' },
    args_hash: 'h',
    rule: 'write_inside_root',
    reason: 'writes inside the allowed root',
    covers: 'shell_exec writes inside the allowed root, for this session',
  }),
];
const resumedLog = [
  ...permissionLog,
  ev(5, 'PERMISSION_RESOLVED', {
    request_id: 'perm_1',
    call_id: 'call_t1',
    decision: 'allow_once',
    args_hash: 'h',
    tool: 'shell_exec',
  }),
  ev(6, 'TOOL_CALLED', {
    call_id: 'call_t1',
    tool: 'shell_exec',
    args: { command: 'touch x' },
    args_hash: 'h',
    step_id: 's1',
  }),
  ev(7, 'TOOL_COMPLETED', {
    call_id: 'call_t1',
    tool: 'shell_exec',
    result: { tool: 'shell_exec', ok: true, output: { exit_code: 0 }, error: null, metadata: {} },
    duration_ms: 4,
  }),
  ev(8, 'STEP_COMPLETED', { plan_id: 'plan_1', step_id: 's1', output: { exit_code: 0 } }),
  ev(9, 'TASK_COMPLETED', {
    stop_reason: 'completed',
    detail: 'done',
    usage: usage(0, 0),
    result: 'touched x',
  }),
];

const frame = (after = 0, runId = 'run-1'): AgUiRunFrame => ({
  threadId: 'thread-1',
  runId,
  taskId: TASK,
  after,
});

/** A frontend tool's call: asked of the client, answered by its result, then the answer. */
const clientToolLog = [
  ev(1, 'TASK_RECEIVED', { input: 'make it teal', session_id: 'thread-1' }),
  ev(2, 'ROUTER_DECIDED', {
    round: 1,
    directive: { type: 'tool', tool: 'setThemeColor', args: { color: 'teal' } },
    source: 'orchestrator',
  }),
  ev(3, 'TOOL_CALLED', {
    call_id: 'call_1',
    tool: 'setThemeColor',
    args: { color: 'teal' },
    args_hash: 'h',
  }),
  ev(4, 'TASK_AWAITING_CLIENT_TOOL', {
    request_id: 'ctool_1',
    call_id: 'call_1',
    tool: 'setThemeColor',
    args: { color: 'teal' },
    reason: 'setThemeColor runs in the client',
  }),
  ev(5, 'TOOL_COMPLETED', {
    call_id: 'call_1',
    tool: 'setThemeColor',
    result: { tool: 'setThemeColor', ok: true, output: { applied: 'teal' }, error: null, metadata: {} },
    duration_ms: 0,
    request_id: 'ctool_1',
  }),
  ev(6, 'TASK_COMPLETED', { stop_reason: 'completed', detail: 'done', usage: usage(0, 0), result: 'Teal.' }),
];

describe('AG-UI events of a task log', () => {
  it("shows a reply's recorded reasoning as one reasoning message, in the order the client enforces", async () => {
    const log = answered.map((e) =>
      e.type === 'MODEL_RESPONDED'
        ? { ...e, payload: { ...e.payload, reasoning: 'They said hi; answer in kind.' } }
        : e,
    ) as RuntimeEvent[];
    const sut = run(frame(), log);
    const reasoning = sut.filter((o) => o.event.type.startsWith('REASONING'));
    expect(reasoning.map((o) => o.event)).toEqual([
      { type: 'REASONING_START', messageId: 'call_m1-reasoning' },
      { type: 'REASONING_MESSAGE_START', messageId: 'call_m1-reasoning', role: 'reasoning' },
      {
        type: 'REASONING_MESSAGE_CONTENT',
        messageId: 'call_m1-reasoning',
        delta: 'They said hi; answer in kind.',
      },
      { type: 'REASONING_MESSAGE_END', messageId: 'call_m1-reasoning' },
      { type: 'REASONING_END', messageId: 'call_m1-reasoning' },
    ]);
    for (const o of sut) expect(EventSchema.safeParse(o.event).error).toBeUndefined();
    expect(await verified(sut)).toHaveLength(sut.length);
    expect(types(run(frame(), answered))).not.toContain('REASONING_START');
  });

  it('streams reasoning as it was recorded piece by piece (REASONING_CHUNK), closed before the text, not shown again with the reply', async () => {
    const thought = (seq: number, index: number, delta: string) =>
      ev(seq, 'REASONING_CHUNK', { call_id: 'call_m1', index, delta });
    // the log with two reasoning pieces before the text, the sequences after them moved up by two
    const log = [
      answered[0],
      answered[1],
      thought(3, 0, 'They said hi; '),
      thought(4, 1, 'answer in kind.'),
      ...answered
        .slice(2)
        .map((e) =>
          ev(
            e.sequence + 2,
            e.type,
            e.type === 'MODEL_RESPONDED'
              ? { ...e.payload, reasoning: 'They said hi; answer in kind.' }
              : e.payload,
          ),
        ),
    ];
    const sut = run(frame(), log);
    const at = types(sut).indexOf('REASONING_START');
    expect(types(sut).slice(at, at + 9)).toEqual([
      'REASONING_START',
      'REASONING_MESSAGE_START',
      'REASONING_MESSAGE_CONTENT',
      'REASONING_MESSAGE_CONTENT',
      'REASONING_MESSAGE_END',
      'REASONING_END',
      'TEXT_MESSAGE_START',
      'TEXT_MESSAGE_CONTENT',
      'TEXT_MESSAGE_CONTENT',
    ]);
    expect(sut.filter((o) => o.event.type === 'REASONING_START')).toHaveLength(1);
    // each piece shown as its log event: the second from sequence 4
    expect(sut[at + 3]).toMatchObject({ id: '4-0', event: { delta: 'answer in kind.' } });
    for (const o of sut) expect(EventSchema.safeParse(o.event).error).toBeUndefined();
    expect(await verified(sut)).toHaveLength(sut.length);
    const snapshot = sut.find((o) => o.event.type === 'MESSAGES_SNAPSHOT')!.event as unknown as {
      messages: Message[];
    };
    expect(snapshot.messages.slice(1)).toEqual([
      { id: 'call_m1-reasoning', role: 'reasoning', content: 'They said hi; answer in kind.' },
      { id: 'call_m1-text', role: 'assistant', content: 'Hello' },
    ]);
    // a run that ends while the reasoning is open closes it
    const cut = run(frame(), [
      ...log.slice(0, 3),
      ev(5, 'TASK_CANCELLED', { stop_reason: 'cancelled', detail: 'x', usage: usage(0, 0) }),
    ]);
    expect(await verified(cut)).toHaveLength(cut.length);
  });

  it("ends a run on a frontend tool's call with an interrupt carrying the call; the resumed run shows the recorded result under the call", async () => {
    const first = run(frame(), clientToolLog.slice(0, 4));
    const start = first.find((o) => o.event.type === 'TOOL_CALL_START')!.event;
    expect(start).toEqual({
      type: 'TOOL_CALL_START',
      toolCallId: `${TASK}.call_1`,
      toolCallName: 'setThemeColor',
    });
    expect(first.at(-1)!.event).toMatchObject({
      type: 'RUN_FINISHED',
      outcome: {
        type: 'interrupt',
        interrupts: [
          {
            id: `${TASK}/ctool_1`,
            reason: 'tool_call',
            toolCallId: `${TASK}.call_1`,
            metadata: { kind: 'client_tool', name: 'setThemeColor', args: { color: 'teal' } },
          },
        ],
      },
    });
    expect(await verified(first)).toHaveLength(first.length);
    // with the answer already in the log (a reconnect), the first run still ends where it ended live
    expect(run(frame(), clientToolLog, false)).toEqual(first);

    const resumed = run(frame(4, 'run-2'), clientToolLog);
    expect(types(resumed)).not.toContain('TOOL_CALL_START');
    expect(resumed.find((o) => o.event.type === 'TOOL_CALL_RESULT')!.event).toMatchObject({
      toolCallId: `${TASK}.call_1`,
      role: 'tool',
    });
    expect(resumed.at(-1)!.event).toMatchObject({
      type: 'RUN_FINISHED',
      outcome: { type: 'success' },
      result: 'Teal.',
    });
    for (const o of [...first, ...resumed]) expect(EventSchema.safeParse(o.event).error).toBeUndefined();
    expect(await verified(resumed)).toHaveLength(resumed.length);
  });

  it('streams the answer as one text message from its chunks and finishes with success, in the order the client enforces', async () => {
    const sut = run(frame(), answered);
    expect(types(sut)).toEqual([
      'RUN_STARTED',
      'STATE_SNAPSHOT',
      'STATE_DELTA',
      'TEXT_MESSAGE_START',
      'TEXT_MESSAGE_CONTENT',
      'TEXT_MESSAGE_CONTENT',
      'TEXT_MESSAGE_END',
      // tokens counted, the round decided, the task completed
      'STATE_DELTA',
      'STATE_DELTA',
      'STATE_DELTA',
      'MESSAGES_SNAPSHOT',
      'RUN_FINISHED',
    ]);
    const contents = sut.filter((o) => o.event.type === 'TEXT_MESSAGE_CONTENT').map((o) => o.event);
    expect(contents.map((c) => (c as { delta: string }).delta).join('')).toBe('Hello');
    expect(sut.at(-1)!.event).toEqual({
      type: 'RUN_FINISHED',
      threadId: 'thread-1',
      runId: 'run-1',
      outcome: { type: 'success' },
      result: 'Hello',
      usage: [{ inputTokens: 10, outputTokens: 5, totalTokens: 15 }],
    });
    for (const o of sut) expect(EventSchema.safeParse(o.event).error).toBeUndefined();
    expect(await verified(sut)).toHaveLength(sut.length);
  });

  it('sends the answer as a text message when no chunk streamed it', () => {
    const sut = run(
      frame(),
      answered.filter((e) => e.type !== 'OUTPUT_CHUNK'),
    );
    const text = sut.filter((o) => o.event.type.startsWith('TEXT_MESSAGE'));
    expect(text.map((o) => o.event)).toEqual([
      { type: 'TEXT_MESSAGE_START', messageId: `${TASK}-answer`, role: 'assistant' },
      { type: 'TEXT_MESSAGE_CONTENT', messageId: `${TASK}-answer`, delta: 'Hello' },
      { type: 'TEXT_MESSAGE_END', messageId: `${TASK}-answer` },
    ]);
  });

  it('gives every event an id from the log that grows, so a cursor resumes with no gap and no duplicate', () => {
    const sut = run(frame(), answered);
    const ids = sut.map((o) => parseEventId(o.id)!);
    for (let i = 1; i < ids.length; i++)
      expect(ids[i][0] > ids[i - 1][0] || (ids[i][0] === ids[i - 1][0] && ids[i][1] > ids[i - 1][1])).toBe(
        true,
      );
    for (let cut = 0; cut < sut.length; cut++) {
      const again = run(frame(), answered).filter((o) => isAfter(o.id, parseEventId(sut[cut].id)));
      expect(again).toEqual(sut.slice(cut + 1));
    }
  });

  it('ends a run that waits for permission with one interrupt carrying the request id and what allow_always covers', async () => {
    const sut = run(frame(), permissionLog);
    expect(types(sut).slice(-3)).toEqual(['STEP_FINISHED', 'MESSAGES_SNAPSHOT', 'RUN_FINISHED']);
    expect(sut.at(-1)!.event).toMatchObject({
      type: 'RUN_FINISHED',
      outcome: {
        type: 'interrupt',
        interrupts: [
          {
            id: `${TASK}/perm_1`,
            reason: 'permission_required',
            message: 'writes inside the allowed root',
            metadata: {
              kind: 'permission',
              request_id: 'perm_1',
              tool: 'shell_exec',
              args: { command: 'touch x' },
              covers: 'shell_exec writes inside the allowed root, for this session',
            },
          },
        ],
      },
    });
    expect(parseInterruptId(`${TASK}/perm_1`)).toEqual({ taskId: TASK, requestId: 'perm_1' });
    for (const o of sut) expect(EventSchema.safeParse(o.event).error).toBeUndefined();
    expect(await verified(sut)).toHaveLength(sut.length);
  });

  it('ends the interrupted run where it ended live also when the log already holds the answer (a reconnect after it)', () => {
    const live = run(frame(), permissionLog);
    const replayed = run(frame(), resumedLog, false);
    expect(replayed).toEqual(live);
  });

  it('a resumed run starts after the request it answers and shows the call, its result and the end', async () => {
    const sut = run(frame(4, 'run-2'), resumedLog);
    expect(types(sut)).toEqual([
      'RUN_STARTED',
      'STATE_SNAPSHOT',
      'STATE_DELTA',
      'TOOL_CALL_START',
      'TOOL_CALL_ARGS',
      'TOOL_CALL_END',
      'STATE_DELTA',
      'TOOL_CALL_RESULT',
      'TEXT_MESSAGE_START',
      'TEXT_MESSAGE_CONTENT',
      'TEXT_MESSAGE_END',
      'STATE_DELTA',
      'MESSAGES_SNAPSHOT',
      'RUN_FINISHED',
    ]);
    expect(sut[0]).toEqual({
      id: '4-0',
      event: { type: 'RUN_STARTED', threadId: 'thread-1', runId: 'run-2', protocolVersion: '1.0' },
    });
    expect(sut[1].event).toMatchObject({
      snapshot: { status: 'awaiting_permission', pending: [{ request_id: 'perm_1' }] },
    });
    expect(sut[2].event).toEqual({
      type: 'STATE_DELTA',
      delta: [
        { op: 'replace', path: '/status', value: 'running' },
        { op: 'replace', path: '/pending', value: [] },
      ],
    });
    expect(sut[4].event).toEqual({
      type: 'TOOL_CALL_ARGS',
      toolCallId: 'task_1.call_t1',
      delta: '{"command":"touch x"}',
    });
    expect(sut[6].event).toEqual({
      type: 'STATE_DELTA',
      delta: [{ op: 'replace', path: '/usage', value: expect.objectContaining({ tool_calls: 1 }) }],
    });
    expect(sut[7].event).toMatchObject({
      toolCallId: 'task_1.call_t1',
      content: '{"exit_code":0}',
      role: 'tool',
    });
    // the step opened before the interrupt closes in the run that opened it, not in this one
    expect(types(sut)).not.toContain('STEP_FINISHED');
    expect(await verified(sut)).toHaveLength(sut.length);
  });

  it('shows a call refused before it ran as called, with its refusal', () => {
    const denied = [
      ...permissionLog,
      ev(5, 'PERMISSION_RESOLVED', {
        request_id: 'perm_1',
        call_id: 'call_t1',
        decision: 'deny',
        args_hash: 'h',
        tool: 'shell_exec',
      }),
      ev(6, 'TOOL_FAILED', {
        call_id: 'call_t1',
        tool: 'shell_exec',
        error: 'denied by the user',
        error_kind: 'permission_denied',
      }),
    ];
    const sut = run(frame(4, 'run-2'), denied);
    expect(sut.filter((o) => o.event.type.startsWith('TOOL_CALL')).map((o) => o.event)).toEqual([
      { type: 'TOOL_CALL_START', toolCallId: 'task_1.call_t1', toolCallName: 'shell_exec' },
      { type: 'TOOL_CALL_END', toolCallId: 'task_1.call_t1' },
      {
        type: 'TOOL_CALL_RESULT',
        messageId: 'task_1.call_t1-result-6',
        toolCallId: 'task_1.call_t1',
        role: 'tool',
        content: 'permission_denied: denied by the user',
      },
    ]);
  });

  it('ends with RUN_ERROR carrying the stop reason when the task fails, and outcome cancelled when it is cancelled', () => {
    const failed = run(frame(), [
      answered[0],
      ev(2, 'TASK_FAILED', {
        stop_reason: 'budget_exceeded',
        detail: 'max_rounds reached',
        usage: emptyUsage(),
      }),
    ]);
    expect(failed.at(-1)!.event).toEqual({
      type: 'RUN_ERROR',
      message: 'max_rounds reached',
      code: 'budget_exceeded',
    });
    const cancelled = run(frame(), [
      answered[0],
      ev(2, 'TASK_CANCELLED', {
        stop_reason: 'cancelled',
        detail: 'cancelled by request',
        usage: emptyUsage(),
      }),
    ]);
    expect(cancelled.at(-1)!.event).toMatchObject({ type: 'RUN_FINISHED', outcome: { type: 'cancelled' } });
    for (const o of [...failed, ...cancelled]) expect(EventSchema.safeParse(o.event).error).toBeUndefined();
  });

  it('emits nothing after the run ended, and nothing for an event it already mapped', () => {
    const { state } = [...answered].reduce((acc, e) => mapEvent(acc.state, e), openRun(frame(), []));
    expect(state.ended).toBe(true);
    expect(
      mapEvent(state, ev(8, 'CHECKPOINT_SAVED', { checkpoint_id: 'c', label: 'x', at_sequence: 7 })).out,
    ).toEqual([]);
    const half = mapEvent(openRun(frame(), []).state, answered[0]).state;
    expect(mapEvent(half, answered[0]).out).toEqual([]);
  });
  it("ends every run with the thread's messages: what @ag-ui/client's HttpAgent holds after applying the runs' events", async () => {
    /** The messages HttpAgent's own apply step gives from `messages` and a run's events. */
    const applied = async (messages: Message[], out: AgUiEmitted[]): Promise<Message[]> => {
      const agent = new HttpAgent({
        url: 'http://127.0.0.1:1/unused',
        threadId: 'thread-1',
        initialMessages: messages,
      });
      const input = { threadId: 'thread-1', runId: 'r', messages, tools: [], context: [], state: {} };
      // the client brings its own rxjs: its observable is subscribed to as it is
      const applying = defaultApplyEvents(
        input as RunAgentInput,
        from(out.map((o) => o.event as BaseEvent)) as never,
        agent,
        [],
      ) as unknown as {
        subscribe(o: {
          next(x: { messages?: Message[] }): void;
          error(e: unknown): void;
          complete(): void;
        }): void;
      };
      const mutations = await new Promise<{ messages?: Message[] }[]>((resolve, reject) => {
        const got: { messages?: Message[] }[] = [];
        applying.subscribe({ next: (x) => got.push(x), error: reject, complete: () => resolve(got) });
      });
      return mutations.reduce<Message[]>((m, x) => x.messages ?? m, messages);
    };
    const snapshotOf = (out: AgUiEmitted[]) =>
      (out.find((o) => o.event.type === 'MESSAGES_SNAPSHOT')!.event as unknown as { messages: Message[] })
        .messages;
    // the frontend's own message id, recorded with the task
    const sentLog = clientToolLog.map((e) =>
      e.type === 'TASK_RECEIVED'
        ? ({
            ...e,
            payload: {
              ...e.payload,
              ag_ui: {
                ...e.payload.ag_ui!,
                user_message: { id: 'u-7', content: 'make it teal' },
              },
            },
          } as RuntimeEvent)
        : e,
    );
    const user: Message = { id: 'u-7', role: 'user', content: 'make it teal' };
    const first = run(frame(), sentLog.slice(0, 4));
    const afterFirst = await applied([user], first);
    expect(snapshotOf(first)).toEqual(afterFirst);
    expect(afterFirst[0]).toEqual(user);
    expect(afterFirst.at(-1)).toMatchObject({ role: 'assistant', toolCalls: [{ id: `${TASK}.call_1` }] });

    const resumed = run(frame(4, 'run-2'), sentLog);
    const afterResumed = await applied(afterFirst, resumed);
    expect(snapshotOf(resumed)).toEqual(afterResumed);
    expect(afterResumed.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    expect(messagesOfTask('thread-1', sentLog)).toEqual(afterResumed);

    // the thread's next run (a new task): its snapshot holds the earlier task's messages first
    const later = answered.map(
      (e) =>
        ({
          ...e,
          task_id: 'task_2',
          ...(e.type === 'TASK_RECEIVED'
            ? {
                payload: {
                  ...e.payload,
                  ag_ui: {
                    thread_id: 'thread-1',
                    run_id: 'run-3',
                    context: [],
                    tools: [],
                    user_message: { id: 'u-8', content: 'say hi' },
                  },
                },
              }
            : {}),
        }) as RuntimeEvent,
    );
    const next = run({ ...frame(), taskId: 'task_2', runId: 'run-3' }, later, true, afterResumed);
    const sent: Message = { id: 'u-8', role: 'user', content: 'say hi' };
    const afterNext = await applied([...afterResumed, sent], next);
    expect(snapshotOf(next)).toEqual(afterNext);
    expect(afterNext).toEqual([
      ...afterResumed,
      sent,
      { id: 'call_m1-text', role: 'assistant', content: 'Hello' },
    ]);
    // a task submitted without AG-UI shows its input under an id of its own
    expect(messagesOfTask('thread-1', answered)[0]).toEqual({
      id: `${TASK}-user`,
      role: 'user',
      content: 'say hi',
    });
  });
});
