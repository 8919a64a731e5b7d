import { parseEventBody, RuntimeEvent } from '@runledger/contracts';
import { GEN_AI, RUNLEDGER_ATTR, SpanDescription, taskSpans } from './genai-spans';

const T0 = Date.parse('2026-01-01T00:00:00.000Z');

/** a task's committed log, one event per call, `ms` after T0 (defaults applied as the store applies them) */
function newLog(taskId = 'task_1') {
  const events: RuntimeEvent[] = [];
  return {
    events,
    add(type: string, payload: unknown, ms: number) {
      const n = events.length + 1;
      events.push({
        ...parseEventBody({ type, payload }),
        event_id: `${taskId}_evt_${n}`,
        task_id: taskId,
        session_id: 'sess_1',
        sequence: n,
        position: n,
        causation_id: null,
        correlation_id: taskId,
        created_at: new Date(T0 + ms).toISOString(),
      } as RuntimeEvent);
      return this;
    },
  };
}

const usage = (prompt: number, completion: number) => ({
  prompt_tokens: prompt,
  completion_tokens: completion,
  total_tokens: prompt + completion,
});

const taskUsage = (prompt: number, completion: number) => ({
  rounds: 1,
  tool_calls: 1,
  model_calls: 1,
  failures: 0,
  ...usage(prompt, completion),
  cost_usd: 0.25,
  by_role: {},
});

const called = (call_id: string, model = 'gpt-test') => ({
  call_id,
  role: 'orchestrator',
  model,
  backend: 'openai',
  prompt_chars: 40,
});

const responded = (call_id: string, extra: Record<string, unknown> = {}) => ({
  call_id,
  role: 'orchestrator',
  model: 'gpt-test-2026-01',
  content: '{"type":"tool","tool":"fs_read","args":{}}',
  usage: usage(120, 30),
  latency_ms: 90,
  finish_reason: 'stop',
  ...extra,
});

const toolCalled = (call_id: string, tool = 'fs_read') => ({
  call_id,
  tool,
  args: { path: 'notes.txt' },
  args_hash: 'h',
});

const toolResult = (ok: boolean, output: unknown) => ({
  tool: 'fs_read',
  ok,
  output,
  error: ok ? null : 'exit code 1',
});

const toolCompleted = (
  call_id: string,
  result: ReturnType<typeof toolResult>,
  tool = 'fs_read',
  duration_ms = 1,
) => ({
  call_id,
  tool,
  result,
  duration_ms,
});

const taskCompleted = (result: string, usage: ReturnType<typeof taskUsage>) => ({
  stop_reason: 'completed',
  detail: 'done',
  usage,
  result,
});

/** a task with one model call, one tool call, then a completion */
function completedTask(taskId = 'task_1') {
  return newLog(taskId)
    .add('TASK_RECEIVED', { input: 'read notes.txt', session_id: 'sess_1' }, 0)
    .add('MODEL_CALLED', called('mc_1'), 10)
    .add('MODEL_RESPONDED', responded('mc_1'), 110)
    .add('TOOL_CALLED', toolCalled('tc_1'), 120)
    .add('TOOL_COMPLETED', toolCompleted('tc_1', toolResult(true, 'hello'), 'fs_read', 5), 125)
    .add('TASK_COMPLETED', taskCompleted('hello', taskUsage(120, 30)), 200);
}

const byOperation = (spans: SpanDescription[], op: string) => spans.filter((s) => s.operation === op);

describe('taskSpans', () => {
  it('maps a task to an invoke_agent root with chat and execute_tool children, timed by the events', () => {
    const sut = taskSpans(completedTask().events, { captureContent: false });

    expect(sut.map((s) => s.name)).toEqual([
      'invoke_agent runledger',
      'chat gpt-test',
      'execute_tool fs_read',
    ]);
    const [root, chat, tool] = sut;
    expect(root).toMatchObject({
      id: 'task_1',
      parent_id: null,
      kind: 'internal',
      start_ms: T0,
      end_ms: T0 + 200,
    });
    expect(root.status).toEqual({ code: 'unset' });
    expect(root.attributes).toMatchObject({
      [GEN_AI.OPERATION_NAME]: 'invoke_agent',
      [GEN_AI.AGENT_NAME]: 'runledger',
      [GEN_AI.CONVERSATION_ID]: 'sess_1',
      [GEN_AI.USAGE_INPUT_TOKENS]: 120,
      [GEN_AI.USAGE_OUTPUT_TOKENS]: 30,
      [RUNLEDGER_ATTR.STOP_REASON]: 'completed',
      [RUNLEDGER_ATTR.TASK_ID]: 'task_1',
      [RUNLEDGER_ATTR.SESSION_ID]: 'sess_1',
      [RUNLEDGER_ATTR.COST_USD]: 0.25,
    });

    expect(chat).toMatchObject({
      id: 'task_1_evt_2',
      parent_id: 'task_1',
      kind: 'client',
      start_ms: T0 + 10,
      end_ms: T0 + 110,
    });
    expect(chat.attributes).toEqual({
      [GEN_AI.OPERATION_NAME]: 'chat',
      [GEN_AI.PROVIDER_NAME]: 'openai',
      [GEN_AI.SYSTEM]: 'openai',
      [GEN_AI.REQUEST_MODEL]: 'gpt-test',
      [GEN_AI.RESPONSE_MODEL]: 'gpt-test-2026-01',
      [GEN_AI.RESPONSE_FINISH_REASONS]: ['stop'],
      [GEN_AI.USAGE_INPUT_TOKENS]: 120,
      [GEN_AI.USAGE_OUTPUT_TOKENS]: 30,
      [GEN_AI.CONVERSATION_ID]: 'sess_1',
      [RUNLEDGER_ATTR.MODEL_ROLE]: 'orchestrator',
      [RUNLEDGER_ATTR.MODEL_ATTEMPT]: 1,
      [RUNLEDGER_ATTR.TASK_ID]: 'task_1',
      [RUNLEDGER_ATTR.SESSION_ID]: 'sess_1',
    });

    expect(tool).toMatchObject({
      id: 'task_1_evt_4',
      parent_id: 'task_1',
      kind: 'internal',
      start_ms: T0 + 120,
      end_ms: T0 + 125,
    });
    expect(tool.status).toEqual({ code: 'unset' });
    expect(tool.attributes).toEqual({
      [GEN_AI.OPERATION_NAME]: 'execute_tool',
      [GEN_AI.TOOL_NAME]: 'fs_read',
      [GEN_AI.TOOL_TYPE]: 'function',
      [GEN_AI.TOOL_CALL_ID]: 'tc_1',
      [RUNLEDGER_ATTR.TOOL_ATTEMPT]: 1,
      [RUNLEDGER_ATTR.TASK_ID]: 'task_1',
      [RUNLEDGER_ATTR.SESSION_ID]: 'sess_1',
    });
  });

  it('leaves prompt, completion and tool content out unless asked to capture it', () => {
    const contentKeys = [
      GEN_AI.INPUT_MESSAGES,
      GEN_AI.OUTPUT_MESSAGES,
      GEN_AI.TOOL_CALL_ARGUMENTS,
      GEN_AI.TOOL_CALL_RESULT,
    ];
    const without = taskSpans(completedTask().events, { captureContent: false });
    for (const span of without)
      for (const key of contentKeys) expect(span.attributes).not.toHaveProperty(key);

    const [root, chat, tool] = taskSpans(completedTask().events, { captureContent: true });
    expect(JSON.parse(root.attributes[GEN_AI.INPUT_MESSAGES] as string)).toEqual([
      { role: 'user', parts: [{ type: 'text', content: 'read notes.txt' }] },
    ]);
    expect(JSON.parse(root.attributes[GEN_AI.OUTPUT_MESSAGES] as string)).toEqual([
      { role: 'assistant', parts: [{ type: 'text', content: 'hello' }], finish_reason: 'completed' },
    ]);
    expect(JSON.parse(chat.attributes[GEN_AI.OUTPUT_MESSAGES] as string)).toEqual([
      {
        role: 'assistant',
        parts: [{ type: 'text', content: responded('mc_1').content }],
        finish_reason: 'stop',
      },
    ]);
    expect(JSON.parse(tool.attributes[GEN_AI.TOOL_CALL_ARGUMENTS] as string)).toEqual({ path: 'notes.txt' });
    expect(JSON.parse(tool.attributes[GEN_AI.TOOL_CALL_RESULT] as string)).toBe('hello');
  });

  it('marks failed model calls, failed tools and a failed task as errors with error.type', () => {
    const log = newLog()
      .add('TASK_RECEIVED', { input: 'x', session_id: 'sess_1' }, 0)
      .add('MODEL_CALLED', called('mc_1'), 10)
      .add(
        'MODEL_RESPONDED',
        responded('mc_1', {
          content: null,
          usage: usage(0, 0),
          error: { kind: 'rate_limited', message: '429' },
          finish_reason: null,
        }),
        20,
      )
      .add('TOOL_CALLED', toolCalled('tc_1'), 30)
      .add(
        'TOOL_FAILED',
        { call_id: 'tc_1', tool: 'fs_read', error: 'took too long', error_kind: 'timeout' },
        40,
      )
      .add('TOOL_CALLED', toolCalled('tc_2', 'shell'), 50)
      .add('TOOL_COMPLETED', toolCompleted('tc_2', toolResult(false, ''), 'shell'), 60)
      .add('TASK_FAILED', { stop_reason: 'tool_error', detail: 'shell failed', usage: taskUsage(0, 0) }, 70);

    const [root, chat, timedOut, shell] = taskSpans(log.events, { captureContent: false });
    expect(root.status).toEqual({ code: 'error', message: 'shell failed' });
    expect(root.attributes[GEN_AI.ERROR_TYPE]).toBe('tool_error');
    expect(root.attributes[RUNLEDGER_ATTR.STOP_REASON]).toBe('tool_error');
    expect(chat.status).toEqual({ code: 'error', message: '429' });
    expect(chat.attributes[GEN_AI.ERROR_TYPE]).toBe('rate_limited');
    // the model that answered is unknown when none did
    expect(chat.attributes).not.toHaveProperty(GEN_AI.RESPONSE_MODEL);
    expect(timedOut.status).toEqual({ code: 'error', message: 'took too long' });
    expect(timedOut.attributes[GEN_AI.ERROR_TYPE]).toBe('timeout');
    expect(shell.status).toEqual({ code: 'error', message: 'exit code 1' });
    expect(shell.attributes[GEN_AI.ERROR_TYPE]).toBe('tool_error');
  });

  it('keeps a cancelled task unmarked and ends calls without an outcome with the task, as errors', () => {
    const log = newLog()
      .add('TASK_RECEIVED', { input: 'x', session_id: 'sess_1' }, 0)
      .add('MODEL_CALLED', called('mc_1'), 10)
      .add('TOOL_CALLED', toolCalled('tc_1'), 20)
      .add('TASK_CANCELLED', { stop_reason: 'cancelled', detail: 'by user', usage: taskUsage(0, 0) }, 90);

    const [root, chat, tool] = taskSpans(log.events, { captureContent: true });
    expect(root.status).toEqual({ code: 'unset' });
    expect(root.attributes[RUNLEDGER_ATTR.STOP_REASON]).toBe('cancelled');
    expect(root.attributes).not.toHaveProperty(GEN_AI.OUTPUT_MESSAGES);
    for (const span of [chat, tool]) {
      expect(span.end_ms).toBe(T0 + 90);
      expect(span.attributes[GEN_AI.ERROR_TYPE]).toBe('outcome_unknown');
      expect(span.status.code).toBe('error');
    }
  });

  it('gives a re-issued call id its own span and ends the earlier attempt where the next began', () => {
    const log = newLog()
      .add('TASK_RECEIVED', { input: 'x', session_id: 'sess_1' }, 0)
      .add('TOOL_CALLED', toolCalled('tc_1'), 10)
      .add('TOOL_CALLED', { ...toolCalled('tc_1'), attempt: 2 }, 50)
      .add('TOOL_COMPLETED', toolCompleted('tc_1', toolResult(true, 'ok')), 60)
      .add('TASK_COMPLETED', taskCompleted('ok', taskUsage(0, 0)), 70);

    const tools = byOperation(taskSpans(log.events, { captureContent: false }), 'execute_tool');
    expect(tools.map((s) => [s.start_ms - T0, s.end_ms - T0, s.status.code])).toEqual([
      [10, 50, 'error'],
      [50, 60, 'unset'],
    ]);
    expect(tools[1].attributes[RUNLEDGER_ATTR.TOOL_ATTEMPT]).toBe(2);
  });

  it('gives a tool refused before its intent was recorded a span of its own', () => {
    const log = newLog()
      .add('TASK_RECEIVED', { input: 'x', session_id: 'sess_1' }, 0)
      .add(
        'TOOL_FAILED',
        { call_id: 'tc_9', tool: 'shell', error: 'bad args', error_kind: 'validation_error' },
        10,
      )
      .add(
        'TASK_FAILED',
        { stop_reason: 'validation_error', detail: 'bad args', usage: taskUsage(0, 0) },
        20,
      );

    const [, tool] = taskSpans(log.events, { captureContent: false });
    expect(tool).toMatchObject({
      name: 'execute_tool shell',
      parent_id: 'task_1',
      start_ms: T0 + 10,
      end_ms: T0 + 10,
    });
    expect(tool.attributes[GEN_AI.TOOL_CALL_ID]).toBe('tc_9');
    expect(tool.attributes[GEN_AI.ERROR_TYPE]).toBe('validation_error');
  });

  it('is a function of the log alone: the same events always map to the same spans', () => {
    const { events } = completedTask();
    expect(taskSpans(events, { captureContent: true })).toEqual(
      taskSpans(structuredClone(events), { captureContent: true }),
    );
  });

  it('refuses a log that is not a whole finished task', () => {
    const { events } = completedTask();
    expect(() => taskSpans(events.slice(0, -1), { captureContent: false })).toThrow(
      'task task_1 has not finished',
    );
    expect(() => taskSpans(events.slice(1), { captureContent: false })).toThrow('starts with TASK_RECEIVED');
    expect(() => taskSpans([], { captureContent: false })).toThrow('starts with TASK_RECEIVED');
  });
});
