import type OpenAI from 'openai';
import { ModelToolCall, Role, TokenUsage } from '@runledger/contracts';
import { ModelCallError, ModelRequest, ModelResponse, estimatedUsage } from './model-backend';
import { OpenAiCompatibleBackend, errorFromCode, openAiSdk } from './openai-compatible';
import {
  ContinuationPlan,
  InputItem,
  continuationRecord,
  planContinuation,
  statelessPlan,
  toResponsesInput,
} from './responses-items';

type Body = OpenAI.Responses.ResponseCreateParamsNonStreaming;

const usageOf = (u: OpenAI.Responses.ResponseUsage | null | undefined): TokenUsage | null =>
  u
    ? {
        prompt_tokens: u.input_tokens,
        completion_tokens: u.output_tokens,
        total_tokens: u.input_tokens + u.output_tokens,
        estimated: false,
      }
    : null;

/** The reply's text: every output_text part of its assistant messages, in order. */
const textOf = (res: OpenAI.Responses.Response): string =>
  res.output
    .flatMap((item) => (item.type === 'message' ? item.content : []))
    .map((part) => (part.type === 'output_text' ? part.text : ''))
    .join('');

/**
 * The reply's reasoning as the server returned it: the summaries of its reasoning items (OpenAI's
 * reasoning models, when summaries are on), else their reasoning text (open-weight models on vLLM).
 */
const reasoningOf = (res: OpenAI.Responses.Response): string => {
  const items = res.output.flatMap((item) => (item.type === 'reasoning' ? [item] : []));
  const summaries = items.flatMap((item) => item.summary.map((s) => s.text)).join('\n\n');
  return summaries || items.flatMap((item) => (item.content ?? []).map((c) => c.text)).join('\n\n');
};

const callsOf = (res: OpenAI.Responses.Response): ModelToolCall[] =>
  res.output.flatMap((item) =>
    item.type === 'function_call' ? [{ id: item.call_id, name: item.name, arguments: item.arguments }] : [],
  );

/** The chat completions words for how a response ended, so the runtime reads both APIs alike. */
function finishOf(res: OpenAI.Responses.Response, calls: readonly ModelToolCall[]): string | null {
  if (res.status === 'incomplete') {
    const reason = res.incomplete_details?.reason;
    return reason === 'max_output_tokens' ? 'length' : (reason ?? 'incomplete');
  }
  if (res.status === 'completed') return calls.length > 0 ? 'tool_calls' : 'stop';
  return res.status ?? null;
}

/**
 * The server no longer knows (or never stored) the response a request continued: a 400 or 404
 * naming previous_response_id, or OpenAI's code for it.
 */
export function refusesPreviousResponse(err: unknown): boolean {
  if (!(err instanceof openAiSdk().APIError) || (err.status !== 400 && err.status !== 404)) return false;
  const body = err.error as { code?: unknown; param?: unknown } | undefined;
  return (
    err.code === 'previous_response_not_found' ||
    body?.param === 'previous_response_id' ||
    /previous[_ ]response/i.test(err.message)
  );
}

/**
 * Any server speaking the Responses API (`/v1/responses`: OpenAI, vLLM, Open Responses). The
 * conversation the server stored is continued with `previous_response_id` when the log's anchor
 * (the last response's id and the hash of the items it saw) still matches what the runtime would
 * send; otherwise, or when the server refuses the id, the whole conversation goes out. Either way
 * MODEL_RESPONDED records which, and why.
 */
export class ResponsesBackend extends OpenAiCompatibleBackend {
  readonly backend = 'openai_responses';

  protected withModels(models: Partial<Record<Role, string>>): ResponsesBackend {
    return new ResponsesBackend({ ...this.options, models });
  }

  protected async send(
    model: string,
    request: ModelRequest,
    signal: AbortSignal,
    touch: () => void,
  ): Promise<ModelResponse> {
    const { instructions, items } = toResponsesInput(request.messages);
    let plan = planContinuation(items, request.continuation);
    let res: ModelResponse & { response_id: string | null };
    try {
      res = await this.attempt(model, request, instructions, plan, signal, touch);
    } catch (err) {
      if (plan.previous_response_id === null || !refusesPreviousResponse(err)) throw err;
      plan = statelessPlan(
        items,
        'refused',
        `the server refused previous_response_id ${plan.previous_response_id}: ${(err as Error).message}`,
      );
      res = await this.attempt(model, request, instructions, plan, signal, touch);
    }
    const { response_id, ...reply } = res;
    return { ...reply, continuation: continuationRecord(items, plan, { ...reply, response_id }) };
  }

  /** json protocol: the directive schema as text.format (see withStructuredOutput) */
  private async attempt(
    model: string,
    request: ModelRequest,
    instructions: string | null,
    plan: ContinuationPlan,
    signal: AbortSignal,
    touch: () => void,
  ): Promise<ModelResponse & { response_id: string | null }> {
    const call = (b: Body) =>
      this.streams(request) ? this.streamed(b, request, signal, touch) : this.whole(b, request, signal);
    return this.withStructuredOutput(this.body(model, request, instructions, plan), 'text', call);
  }

  private body(
    model: string,
    request: ModelRequest,
    instructions: string | null,
    plan: ContinuationPlan,
  ): Body {
    const body: Body = {
      model,
      input: plan.send as InputItem[] as OpenAI.Responses.ResponseInput,
      // stored, so that the next request can continue it
      store: true,
      ...(instructions !== null ? { instructions } : {}),
      ...(plan.previous_response_id !== null ? { previous_response_id: plan.previous_response_id } : {}),
    };
    if (this.offersTools(request)) {
      body.tools = request.tools!.map((f) => ({
        type: 'function',
        name: f.name,
        description: f.description,
        parameters: f.parameters,
        strict: false,
      }));
      Object.assign(body, this.toolChoiceOf(request));
    }
    if (this.protocol === 'json' && request.response_schema && !this.structuredOutputRefused)
      body.text = {
        format: {
          type: 'json_schema',
          name: request.response_schema.name,
          schema: request.response_schema.schema,
        },
      };
    return body;
  }

  private answer(
    res: OpenAI.Responses.Response,
    request: ModelRequest,
    content: string,
    model: string,
    reasoning = reasoningOf(res),
  ): ModelResponse & { response_id: string | null } {
    const calls = callsOf(res);
    return {
      content,
      ...(reasoning ? { reasoning } : {}),
      usage: usageOf(res.usage) ?? estimatedUsage(request.messages, content),
      model: res.model || model,
      finish_reason: finishOf(res, calls),
      ...this.callsOf(request, calls),
      response_id: res.id || null,
    };
  }

  private async whole(
    body: Body,
    request: ModelRequest,
    signal: AbortSignal,
  ): Promise<ModelResponse & { response_id: string | null }> {
    const res = await this.client.responses.create(body, { signal });
    if (res.status === 'failed')
      throw errorFromCode(res.error?.code, res.error?.message ?? 'the response failed');
    return this.answer(res, request, textOf(res), body.model!);
  }

  private async streamed(
    body: Body,
    request: ModelRequest,
    signal: AbortSignal,
    touch: () => void,
  ): Promise<ModelResponse & { response_id: string | null }> {
    const stream = await this.client.responses.create({ ...body, stream: true }, { signal });
    let content = '';
    // the reasoning as it streamed (summaries or reasoning text): the pieces make up what is recorded
    let streamedReasoning = '';
    let final: OpenAI.Responses.Response | null = null;
    for await (const event of stream) {
      touch();
      if (event.type === 'response.output_text.delta' && event.delta) {
        content += event.delta;
        request.onChunk?.(event.delta);
      } else if (
        (event.type === 'response.reasoning_summary_text.delta' ||
          event.type === 'response.reasoning_text.delta') &&
        event.delta
      ) {
        streamedReasoning += event.delta;
        request.onReasoningChunk?.(event.delta);
      } else if (event.type === 'response.completed' || event.type === 'response.incomplete')
        final = event.response;
      else if (event.type === 'response.failed')
        throw errorFromCode(
          event.response.error?.code,
          event.response.error?.message ?? 'the response failed',
        );
      else if (event.type === 'error') throw errorFromCode(event.code, event.message);
    }
    if (!final) throw new ModelCallError('provider_error', 'the stream ended before the response completed');
    // the streamed text is the answer the watchers saw; a server that streamed none sends it whole at the end
    if (!content) {
      content = textOf(final);
      if (content) request.onChunk?.(content);
    }
    // the reasoning the watchers saw is the one recorded; a server that streamed none sends it whole
    const reasoning = streamedReasoning || reasoningOf(final);
    return this.answer(final, request, content, body.model!, reasoning);
  }
}
