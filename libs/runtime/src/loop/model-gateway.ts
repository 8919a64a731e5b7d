import { EventPayload, EventValidationError, NewEvent, PriceTable, Role, newId } from '@runledger/contracts';
import { admit, costOf, resolveBudgets } from '../discipline/budgets';
import { FailureError } from '../model/failure-error';
import { DisciplineSettings } from '../discipline/settings';
import { ModelBackend, ModelCallError, ModelRequest, ModelResponse, zeroUsage } from '../model/model-backend';
import { TaskWriter } from '../log/task-writer';
import { continuationKey, modelCallKey } from '../log/progress';
import { CharSafeChunks, PlainTextStream, RespondStreamExtractor } from './respond-stream';
import { checkToolTurns, withJsonArguments } from '../model/tool-turns';

export interface GatewayCall {
  writer: TaskWriter;
  backend: ModelBackend;
  role: Role;
  round: number | null;
  request: Omit<ModelRequest, 'role' | 'onChunk' | 'cursor'>;
  /** stream the answer as OUTPUT_CHUNK events: a `respond` directive's content, or (tools protocol) the reply's text */
  streamRespond?: boolean;
  /** 1 for the first try of a request, n for its (n-1)th retry */
  attempt?: number;
  /** the plan step the call works for (a coder step), recorded on MODEL_CALLED */
  step_id?: string;
}

/**
 * The one place a model is called: MODEL_CALLED before, MODEL_RESPONDED after
 * (content or error, usage, latency), so every run can be replayed offline.
 */
export class ModelGateway {
  /** prices priced into MODEL_RESPONDED.cost_usd when the call is recorded; with run discipline, calls per role are budgeted */
  constructor(
    private readonly prices: PriceTable = {},
    private readonly discipline: DisciplineSettings | null = null,
  ) {}

  async call(c: GatewayCall): Promise<ModelResponse> {
    const configured = c.backend.modelFor(c.role);
    if (!configured) throw new ModelCallError('provider_error', `no model for role ${c.role}`);
    const model = c.request.model ?? configured;
    const d = this.discipline;
    const over = d
      ? admit(
          c.writer.progress.usage,
          resolveBudgets(c.writer.progress.budgets, d.budgetDefaults, d.budgetMaximums).budgets,
          { kind: 'model_call', role: c.role },
        )
      : null;
    if (over) throw new FailureError('budget_exceeded', over.detail);
    // A malformed tool-turn sequence is refused here, before anything is sent or recorded as called.
    const turns = checkToolTurns(c.request.messages);
    if (!turns.ok)
      throw new FailureError('validation_error', `malformed tool-turn sequence, not sent: ${turns.error}`);
    const call_id = newId('mc');
    const cursor = c.writer.progress.modelCalls[modelCallKey(c.backend.backend, c.role)] ?? 0;
    const prompt_chars = c.request.messages.reduce((n, m) => n + m.content.length, 0);
    const called: NewEvent[] = [
      {
        type: 'MODEL_CALLED',
        payload: {
          call_id,
          role: c.role,
          model,
          backend: c.backend.backend,
          attempt: c.attempt ?? 1,
          round: c.round,
          prompt_chars,
          ...(c.step_id !== undefined ? { step_id: c.step_id } : {}),
          ...(turns.turns > 0 ? { tool_turns: { count: turns.turns, malformed: 0 } } : {}),
        },
      },
    ];
    // the intent is durable before a request leaves the process; an answer computed here sends nothing
    if (c.backend.answersInProcess) c.writer.defer(called);
    else await c.writer.append(called);
    const started = Date.now();
    const extractor = c.streamRespond
      ? c.backend.speaksToolCalls(c.role)
        ? new PlainTextStream()
        : new RespondStreamExtractor()
      : null;
    const safe = new CharSafeChunks();
    const safeReasoning = new CharSafeChunks();
    const next = { OUTPUT_CHUNK: 0, REASONING_CHUNK: 0 };
    // the pieces reach watchers within a stream window; the reply's record follows them in the same order
    let streamFailed: { error: unknown } | null = null;
    const emit = (type: keyof typeof next, delta: string) => {
      if (!delta || streamFailed) return;
      try {
        c.writer.stream([{ type, payload: { call_id, index: next[type]++, delta } }]);
      } catch (error) {
        // the writer refused (it failed earlier): the call ends with that error once the backend returns
        streamFailed = { error };
      }
    };
    const onChunk = extractor
      ? (delta: string) => emit('OUTPUT_CHUNK', safe.push(extractor.feed(delta)))
      : undefined;
    const onReasoningChunk = extractor
      ? (delta: string) => emit('REASONING_CHUNK', safeReasoning.push(delta))
      : undefined;
    try {
      const idle_timeout_ms = c.request.idle_timeout_ms ?? this.discipline?.streamIdleTimeoutMs;
      const res = await c.backend.complete({
        ...c.request,
        messages: withJsonArguments(c.request.messages),
        idle_timeout_ms,
        role: c.role,
        cursor,
        stream: Boolean(extractor),
        onChunk,
        onReasoningChunk,
        continuation:
          c.writer.progress.continuations.get(continuationKey(c.backend.backend, c.role, c.step_id)) ?? null,
      });
      emit('REASONING_CHUNK', safeReasoning.flush());
      emit('OUTPUT_CHUNK', safe.flush());
      if (streamFailed) throw (streamFailed as { error: unknown }).error;
      // the reply rides with what the task does with it next (a tool's intent, the next call, the end)
      this.deferReply(c.writer, {
        call_id,
        role: c.role,
        model: res.model,
        content: res.content,
        usage: res.usage,
        latency_ms: Date.now() - started,
        error: null,
        finish_reason: res.finish_reason,
        retry_after_ms: null,
        ...(res.tool_calls ? { tool_calls: res.tool_calls } : {}),
        cost_usd: costOf(res.model, res.usage, this.prices),
        ...(res.reasoning ? { reasoning: res.reasoning } : {}),
        ...(res.continuation ? { continuation: res.continuation } : {}),
      });
      return res;
    } catch (err) {
      const e =
        err instanceof ModelCallError
          ? err
          : new ModelCallError('provider_error', err instanceof Error ? err.message : String(err));
      await c.writer.append([
        {
          type: 'MODEL_RESPONDED',
          payload: {
            call_id,
            role: c.role,
            model,
            content: null,
            usage: zeroUsage(),
            latency_ms: Date.now() - started,
            error: { kind: e.kind, message: e.message },
            finish_reason: null,
            retry_after_ms: e.retry_after_ms,
          },
        },
      ]);
      throw e;
    }
  }

  /**
   * A reply our own event check refuses (a tool call with no name, an id too long to store) is not the
   * provider failing: asking again would bring the same reply, so it is a validation_error, never retried as is.
   */
  private deferReply(writer: TaskWriter, payload: EventPayload<'MODEL_RESPONDED'>): void {
    try {
      writer.defer([{ type: 'MODEL_RESPONDED', payload }]);
    } catch (err) {
      if (!(err instanceof EventValidationError)) throw err;
      throw new ModelCallError('validation_error', `the reply cannot be recorded: ${err.message}`);
    }
  }
}
