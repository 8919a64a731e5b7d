import { RuntimeEvent, isFinalEventType } from '@runledger/contracts';

/**
 * Attribute names of the OpenTelemetry GenAI semantic conventions. They are still "incubating", and
 * the semantic-conventions package advises copying incubating names rather than importing its
 * `/incubating` entry point (which may break between minor versions).
 */
export const GEN_AI = {
  OPERATION_NAME: 'gen_ai.operation.name',
  PROVIDER_NAME: 'gen_ai.provider.name',
  /** the name before gen_ai.provider.name (semconv < 1.37); several backends still read only this one */
  SYSTEM: 'gen_ai.system',
  AGENT_NAME: 'gen_ai.agent.name',
  CONVERSATION_ID: 'gen_ai.conversation.id',
  REQUEST_MODEL: 'gen_ai.request.model',
  RESPONSE_MODEL: 'gen_ai.response.model',
  RESPONSE_FINISH_REASONS: 'gen_ai.response.finish_reasons',
  USAGE_INPUT_TOKENS: 'gen_ai.usage.input_tokens',
  USAGE_OUTPUT_TOKENS: 'gen_ai.usage.output_tokens',
  INPUT_MESSAGES: 'gen_ai.input.messages',
  OUTPUT_MESSAGES: 'gen_ai.output.messages',
  TOOL_NAME: 'gen_ai.tool.name',
  TOOL_TYPE: 'gen_ai.tool.type',
  TOOL_CALL_ID: 'gen_ai.tool.call.id',
  TOOL_CALL_ARGUMENTS: 'gen_ai.tool.call.arguments',
  TOOL_CALL_RESULT: 'gen_ai.tool.call.result',
  ERROR_TYPE: 'error.type',
} as const;

/** What Runledger adds beside the conventions, under its own namespace. */
export const RUNLEDGER_ATTR = {
  TASK_ID: 'runledger.task_id',
  SESSION_ID: 'runledger.session_id',
  STOP_REASON: 'runledger.stop_reason',
  MODEL_ROLE: 'runledger.model.role',
  MODEL_ATTEMPT: 'runledger.model.attempt',
  COST_USD: 'runledger.cost_usd',
  TOOL_ATTEMPT: 'runledger.tool.attempt',
} as const;

export const AGENT_NAME = 'runledger';

export type SpanAttributeValue = string | number | boolean | string[];

/** One span as the log describes it: no SDK types, so the mapping is a pure function of the events. */
export interface SpanDescription {
  /** the event id that opened the span (the task id for the root): stable across exports of one log */
  id: string;
  parent_id: string | null;
  name: string;
  operation: 'invoke_agent' | 'chat' | 'execute_tool';
  kind: 'internal' | 'client';
  /** epoch milliseconds, from the events' created_at */
  start_ms: number;
  end_ms: number;
  attributes: Record<string, SpanAttributeValue>;
  status: { code: 'unset' } | { code: 'error'; message: string };
}

export interface SpanMappingOptions {
  /** prompt, completion, tool argument and result content; off by default (it may hold personal data) */
  captureContent: boolean;
}

type Of<T extends RuntimeEvent['type']> = Extract<RuntimeEvent, { type: T }>;

const NO_OUTCOME = 'no outcome was recorded before the task ended';

/**
 * The GenAI spans of one finished task, from its events in sequence order: an `invoke_agent` root
 * over the whole task, a `chat` child per model call (MODEL_CALLED..MODEL_RESPONDED) and an
 * `execute_tool` child per tool call (TOOL_CALLED..TOOL_COMPLETED/TOOL_FAILED). Times are the
 * events' created_at, so the same log (or a replay of it) always maps to the same spans. A call
 * with no recorded outcome ends with the task, marked as an error.
 */
export function taskSpans(events: readonly RuntimeEvent[], options: SpanMappingOptions): SpanDescription[] {
  const first = events[0];
  const last = events[events.length - 1];
  if (!first || first.type !== 'TASK_RECEIVED') throw new Error('a task log starts with TASK_RECEIVED');
  if (!isFinalEventType(last.type)) throw new Error(`task ${first.task_id} has not finished`);
  const final = last as Of<'TASK_COMPLETED' | 'TASK_FAILED' | 'TASK_CANCELLED'>;
  const taskId = first.task_id;
  const common = { [RUNLEDGER_ATTR.TASK_ID]: taskId, [RUNLEDGER_ATTR.SESSION_ID]: first.session_id };
  const at = (e: RuntimeEvent): number => Date.parse(e.created_at);

  const root = invokeAgentSpan(first, final, common, options);
  const children: SpanDescription[] = [];
  const openChats = new Map<string, SpanDescription>();
  const openTools = new Map<string, SpanDescription>();
  const open = (table: Map<string, SpanDescription>, callId: string, span: SpanDescription): void => {
    // a call re-issued under its id (a resumed intent) leaves the earlier attempt without an outcome
    const earlier = table.get(callId);
    if (earlier) closeSpan(earlier, span.start_ms, { type: 'outcome_unknown', message: NO_OUTCOME });
    table.set(callId, span);
    children.push(span);
  };

  for (const e of events) {
    switch (e.type) {
      case 'MODEL_CALLED':
        open(openChats, e.payload.call_id, chatSpan(e, taskId, common));
        break;
      case 'MODEL_RESPONDED': {
        const span = openChats.get(e.payload.call_id);
        if (!span) break;
        openChats.delete(e.payload.call_id);
        respond(span, e, options);
        closeSpan(
          span,
          at(e),
          e.payload.error ? { type: e.payload.error.kind, message: e.payload.error.message } : null,
        );
        break;
      }
      case 'TOOL_CALLED':
        open(
          openTools,
          e.payload.call_id,
          toolSpan(e, e.payload.call_id, e.payload.tool, taskId, common, options),
        );
        break;
      case 'TOOL_COMPLETED':
      case 'TOOL_FAILED': {
        // a call refused before its intent was recorded (validation, hard stop) still gets its span
        const span =
          openTools.get(e.payload.call_id) ??
          toolSpan(e, e.payload.call_id, e.payload.tool, taskId, common, options);
        if (!openTools.delete(e.payload.call_id)) children.push(span);
        toolOutcome(span, e, options);
        break;
      }
      default:
        break;
    }
  }
  for (const span of [...openChats.values(), ...openTools.values()])
    closeSpan(span, root.end_ms, { type: 'outcome_unknown', message: NO_OUTCOME });
  return [root, ...children];
}

function invokeAgentSpan(
  received: Of<'TASK_RECEIVED'>,
  final: Of<'TASK_COMPLETED' | 'TASK_FAILED' | 'TASK_CANCELLED'>,
  common: Record<string, string>,
  options: SpanMappingOptions,
): SpanDescription {
  const { stop_reason, usage, detail } = final.payload;
  const span = describeSpan(
    'invoke_agent',
    AGENT_NAME,
    'internal',
    { id: received.task_id, parent_id: null, start: received.created_at, end: final.created_at },
    {
      [GEN_AI.AGENT_NAME]: AGENT_NAME,
      [GEN_AI.CONVERSATION_ID]: received.session_id,
      [GEN_AI.USAGE_INPUT_TOKENS]: usage.prompt_tokens,
      [GEN_AI.USAGE_OUTPUT_TOKENS]: usage.completion_tokens,
      [RUNLEDGER_ATTR.STOP_REASON]: stop_reason,
      [RUNLEDGER_ATTR.COST_USD]: usage.cost_usd,
    },
    common,
  );
  const attributes = span.attributes;
  if (options.captureContent) {
    attributes[GEN_AI.INPUT_MESSAGES] = messages('user', received.payload.input);
    const result = final.type === 'TASK_CANCELLED' ? null : final.payload.result;
    if (result !== null) attributes[GEN_AI.OUTPUT_MESSAGES] = messages('assistant', result, stop_reason);
  }
  if (final.type === 'TASK_FAILED') {
    attributes[GEN_AI.ERROR_TYPE] = stop_reason;
    span.status = { code: 'error', message: detail };
  }
  return span;
}

/**
 * The parts every span shares: named `<operation> <subject>`, tagged with its GenAI operation and the
 * task's common attributes, status unset; `end` defaults to `start` until an outcome closes the span.
 */
function describeSpan(
  operation: SpanDescription['operation'],
  subject: string,
  kind: SpanDescription['kind'],
  at: { id: string; parent_id: string | null; start: string; end?: string },
  attributes: Record<string, SpanAttributeValue>,
  common: Record<string, string>,
): SpanDescription {
  return {
    id: at.id,
    parent_id: at.parent_id,
    name: `${operation} ${subject}`,
    operation,
    kind,
    start_ms: Date.parse(at.start),
    end_ms: Date.parse(at.end ?? at.start),
    attributes: { [GEN_AI.OPERATION_NAME]: operation, ...attributes, ...common },
    status: { code: 'unset' },
  };
}

function chatSpan(e: Of<'MODEL_CALLED'>, parent: string, common: Record<string, string>): SpanDescription {
  const { model, backend, role, attempt } = e.payload;
  return describeSpan(
    'chat',
    model,
    'client',
    { id: e.event_id, parent_id: parent, start: e.created_at },
    {
      [GEN_AI.PROVIDER_NAME]: backend,
      [GEN_AI.SYSTEM]: backend,
      [GEN_AI.REQUEST_MODEL]: model,
      [GEN_AI.CONVERSATION_ID]: e.session_id,
      [RUNLEDGER_ATTR.MODEL_ROLE]: role,
      [RUNLEDGER_ATTR.MODEL_ATTEMPT]: attempt,
    },
    common,
  );
}

function respond(span: SpanDescription, e: Of<'MODEL_RESPONDED'>, options: SpanMappingOptions): void {
  const p = e.payload;
  const a = span.attributes;
  a[GEN_AI.USAGE_INPUT_TOKENS] = p.usage.prompt_tokens;
  a[GEN_AI.USAGE_OUTPUT_TOKENS] = p.usage.completion_tokens;
  if (p.cost_usd !== undefined) a[RUNLEDGER_ATTR.COST_USD] = p.cost_usd;
  // a failed call records the model it asked for, not one that answered
  if (!p.error) a[GEN_AI.RESPONSE_MODEL] = p.model;
  if (p.finish_reason) a[GEN_AI.RESPONSE_FINISH_REASONS] = [p.finish_reason];
  if (options.captureContent && p.content !== null)
    a[GEN_AI.OUTPUT_MESSAGES] = messages('assistant', p.content, p.finish_reason);
}

function toolSpan(
  e: Of<'TOOL_CALLED' | 'TOOL_COMPLETED' | 'TOOL_FAILED'>,
  callId: string,
  tool: string,
  parent: string,
  common: Record<string, string>,
  options: SpanMappingOptions,
): SpanDescription {
  const span = describeSpan(
    'execute_tool',
    tool,
    'internal',
    { id: e.event_id, parent_id: parent, start: e.created_at },
    {
      [GEN_AI.TOOL_NAME]: tool,
      [GEN_AI.TOOL_TYPE]: 'function',
      [GEN_AI.TOOL_CALL_ID]: callId,
    },
    common,
  );
  if (e.type === 'TOOL_CALLED') {
    span.attributes[RUNLEDGER_ATTR.TOOL_ATTEMPT] = e.payload.attempt;
    if (options.captureContent) span.attributes[GEN_AI.TOOL_CALL_ARGUMENTS] = JSON.stringify(e.payload.args);
  }
  return span;
}

function toolOutcome(
  span: SpanDescription,
  e: Of<'TOOL_COMPLETED' | 'TOOL_FAILED'>,
  options: SpanMappingOptions,
): void {
  const result = e.payload.result;
  const end = Date.parse(e.created_at);
  if (options.captureContent && result)
    span.attributes[GEN_AI.TOOL_CALL_RESULT] = JSON.stringify(result.output);
  if (e.type === 'TOOL_FAILED')
    closeSpan(span, end, { type: e.payload.error_kind, message: e.payload.error });
  else if (!e.payload.result.ok)
    closeSpan(span, end, {
      type: 'tool_error',
      message: e.payload.result.error ?? 'the tool reported a failure',
    });
  else closeSpan(span, end, null);
}

function closeSpan(
  span: SpanDescription,
  end: number,
  error: { type: string; message: string } | null,
): void {
  span.end_ms = end;
  if (error) {
    span.attributes[GEN_AI.ERROR_TYPE] = error.type;
    span.status = { code: 'error', message: error.message };
  }
}

/** gen_ai.input.messages / gen_ai.output.messages: a JSON string of one text message */
function messages(role: 'user' | 'assistant', content: string, finishReason?: string | null): string {
  const message: Record<string, unknown> = { role, parts: [{ type: 'text', content }] };
  if (finishReason) message.finish_reason = finishReason;
  return JSON.stringify([message]);
}
