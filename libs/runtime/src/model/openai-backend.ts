import OpenAI, { APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import { ModelToolCall, Role, TokenUsage } from '@runledger/contracts';
import {
  ChatMessage,
  ModelBackend,
  ModelCallError,
  ModelRequest,
  ModelResponse,
  ToolCallSettings,
  estimatedUsage,
} from './model-backend';
import { ToolCallAssembler } from './tool-turns';
import { createDeadline } from '../discipline/timeouts';
import { providerLabel } from './providers';

export interface OpenAiBackendOptions {
  baseURL?: string;
  apiKey?: string;
  /** model name per role; a role without one uses the orchestrator's */
  models: Partial<Record<Role, string>>;
  /** how events name this provider in a fallback chain; `<orchestrator model>@<host>` when absent */
  label?: string;
  /** tools: native tool calling (the default); json: the directive as JSON text, for servers without tool support */
  protocol?: ModelProtocol;
  /** false: never ask the server to stream (some cannot stream tool calls); answers then arrive whole, without OUTPUT_CHUNK */
  stream?: boolean;
  /** tool_choice / parallel_tool_calls per role (tools protocol); the server's defaults when absent */
  toolCalls?: Partial<Record<Role, ToolCallSettings>>;
}

export const MODEL_PROTOCOLS = ['tools', 'json'] as const;
export type ModelProtocol = (typeof MODEL_PROTOCOLS)[number];

/** Retry-After (seconds or an HTTP date) or retry-after-ms, in milliseconds. */
function retryAfterMs(headers: Headers | undefined): number | null {
  const ms = headers?.get('retry-after-ms');
  if (ms && Number.isFinite(Number(ms))) return Number(ms);
  const value = headers?.get('retry-after');
  if (!value) return null;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(value);
  return Number.isNaN(date) ? null : Math.max(0, date - Date.now());
}

const RATE_LIMIT_CODES = [
  'rate_limit_exceeded',
  'rate_limit_error',
  'insufficient_quota',
  'too_many_requests',
];
const AUTH_CODES = ['invalid_api_key', 'authentication_error', 'permission_error', 'invalid_authentication'];

/**
 * The HTTP status of an error: the response's, or for an error sent inside a
 * stream (`data: {"error": {...}}`, no status of its own) the one its body names.
 */
function statusOf(err: APIError): number | undefined {
  if (err.status !== undefined) return err.status;
  const body = err.error as { status?: unknown; code?: unknown } | undefined;
  for (const v of [body?.status, body?.code])
    if (typeof v === 'number' || /^\d{3}$/.test(String(v))) return Number(v);
  return undefined;
}

/** The openai client's errors in the failure taxonomy's words: by status, else by the body's code or type. */
export function toModelCallError(err: unknown, timeoutMs: number): ModelCallError {
  if (err instanceof ModelCallError) return err;
  if (err instanceof APIConnectionTimeoutError)
    return new ModelCallError('timeout', `model call timed out after ${timeoutMs} ms`);
  if (err instanceof APIUserAbortError) return new ModelCallError('timeout', 'model call aborted');
  if (err instanceof APIError) {
    const status = statusOf(err);
    const names = [err.code, err.type].filter((v): v is string => typeof v === 'string');
    if (status === 401 || status === 403 || names.some((n) => AUTH_CODES.includes(n)))
      return new ModelCallError('authentication_error', err.message);
    if (status === 429 || names.some((n) => RATE_LIMIT_CODES.includes(n)))
      return new ModelCallError('rate_limited', err.message, retryAfterMs(err.headers));
    return new ModelCallError('provider_error', err.message, retryAfterMs(err.headers));
  }
  return new ModelCallError('provider_error', err instanceof Error ? err.message : String(err));
}

const usageOf = (u: OpenAI.CompletionUsage | null | undefined): TokenUsage | null =>
  u
    ? {
        prompt_tokens: u.prompt_tokens,
        completion_tokens: u.completion_tokens,
        total_tokens: u.total_tokens,
        estimated: false,
      }
    : null;

/** Our messages in the wire shape: tool calls as function calls, tool results answering their call id. */
function toWire(messages: readonly ChatMessage[]): OpenAI.ChatCompletionMessageParam[] {
  return messages.map((m): OpenAI.ChatCompletionMessageParam => {
    if (m.role === 'tool') return { role: 'tool', tool_call_id: m.tool_call_id, content: m.content };
    if (m.role === 'assistant' && m.tool_calls)
      return {
        role: 'assistant',
        content: m.content || null,
        tool_calls: m.tool_calls.map((c) => ({
          id: c.id,
          type: 'function',
          function: { name: c.name, arguments: c.arguments },
        })),
      };
    return { role: m.role, content: m.content };
  });
}

/** A whole reply's function calls; one the server sent without an id is given one from its index, as a streamed one is. */
const functionCalls = (calls: readonly OpenAI.ChatCompletionMessageToolCall[] | undefined): ModelToolCall[] =>
  (calls ?? []).flatMap((c, index) =>
    c.type === 'function'
      ? [{ id: c.id || `call_${index}`, name: c.function.name, arguments: c.function.arguments }]
      : [],
  );

/** A 400 that names response_format: the server does not do structured output. */
const refusesResponseFormat = (err: unknown): boolean =>
  err instanceof APIError && err.status === 400 && /response_format|json_schema/i.test(err.message);

/** Any OpenAI-compatible chat completions server: OpenAI, Ollama, vLLM, llama.cpp server. */
export class OpenAiBackend extends ModelBackend {
  readonly backend = 'openai';
  private readonly client: OpenAI;
  private readonly protocol: ModelProtocol;
  /** the server answered response_format with a 400 once: later requests carry the directive in text only */
  private responseFormatRefused = false;

  constructor(private readonly options: OpenAiBackendOptions) {
    super();
    // Retries are the run-discipline policy's decision, recorded as events, never the client's.
    this.client = new OpenAI({ baseURL: options.baseURL, apiKey: options.apiKey || 'unset', maxRetries: 0 });
    this.protocol = options.protocol ?? 'tools';
  }

  override speaksToolCalls(): boolean {
    return this.protocol === 'tools';
  }

  modelFor(role: Role): string | null {
    return this.options.models[role] ?? this.options.models.orchestrator ?? null;
  }

  /** The same server with the orchestrator on `model`; the other roles keep the models they resolved to. */
  override withOrchestratorModel(model: string): OpenAiBackend {
    const resolved = (role: Role) => this.modelFor(role) ?? undefined;
    return new OpenAiBackend({
      ...this.options,
      models: {
        orchestrator: model,
        coder: resolved('coder'),
        critic: resolved('critic'),
        utility: resolved('utility'),
      },
    });
  }

  override get label(): string {
    return (
      this.options.label ?? providerLabel(this.modelFor('orchestrator') ?? 'openai', this.options.baseURL)
    );
  }

  async complete(request: ModelRequest): Promise<ModelResponse> {
    const model =
      this.modelFor(request.role) === null ? null : (request.model ?? this.modelFor(request.role));
    if (!model) throw new ModelCallError('provider_error', `no model configured for role ${request.role}`);
    // Layered: the whole request has timeout_ms; a stream also may not go silent for longer than
    // idle_timeout_ms (each chunk is a sign of life); the caller's signal (task deadline, cancel) wins over both.
    // A reply that arrives whole (streaming off) sends no sign of life before it ends: only timeout_ms counts.
    const deadline = createDeadline({
      totalMs: request.timeout_ms,
      idleMs: this.streams(request) ? (request.idle_timeout_ms ?? request.timeout_ms) : null,
      parent: request.signal,
      label: 'model call',
    });
    const timedOut = () =>
      deadline.reason()?.kind === 'timeout' && !request.signal?.aborted ? deadline.reason() : null;
    try {
      const res = await this.send(model, request, deadline.signal, deadline.touch);
      // An aborted stream may end quietly instead of throwing: a cut-off answer is never an answer.
      if (deadline.signal.aborted)
        throw new ModelCallError(
          timedOut() ? 'timeout' : 'provider_error',
          timedOut()?.message ?? 'model call aborted',
        );
      return res;
    } catch (err) {
      const t = timedOut();
      if (t) throw new ModelCallError('timeout', t.message);
      throw toModelCallError(err, request.timeout_ms);
    } finally {
      deadline.dispose();
    }
  }

  /** the caller asked for a stream and this server is asked to stream (RUNLEDGER_MODEL_STREAM not off) */
  private streams(request: ModelRequest): boolean {
    return request.stream === true && this.options.stream !== false;
  }

  /** json protocol: structured output first; a server that refuses response_format is asked again without it, from then on. */
  private async send(
    model: string,
    request: ModelRequest,
    signal: AbortSignal,
    touch: () => void,
  ): Promise<ModelResponse> {
    const body = this.body(model, request);
    const call = (b: OpenAI.ChatCompletionCreateParamsNonStreaming) =>
      this.streams(request) ? this.streamed(b, request, signal, touch) : this.whole(b, request, signal);
    if (!body.response_format) return call(body);
    try {
      return await call(body);
    } catch (err) {
      if (!refusesResponseFormat(err)) throw err;
      this.responseFormatRefused = true;
      const { response_format: _refused, ...plain } = body;
      return call(plain);
    }
  }

  private body(model: string, request: ModelRequest): OpenAI.ChatCompletionCreateParamsNonStreaming {
    const body: OpenAI.ChatCompletionCreateParamsNonStreaming = { model, messages: toWire(request.messages) };
    if (this.protocol === 'tools' && request.tools && request.tools.length > 0) {
      body.tools = request.tools.map((f) => ({
        type: 'function',
        function: { name: f.name, description: f.description, parameters: f.parameters },
      }));
      const settings = this.options.toolCalls?.[request.role] ?? {};
      if (settings.tool_choice) body.tool_choice = settings.tool_choice;
      if (request.tool_choice) body.tool_choice = request.tool_choice;
      if (settings.parallel_tool_calls !== undefined) body.parallel_tool_calls = settings.parallel_tool_calls;
    }
    if (this.protocol === 'json' && request.response_schema && !this.responseFormatRefused)
      body.response_format = {
        type: 'json_schema',
        json_schema: { name: request.response_schema.name, schema: request.response_schema.schema },
      };
    return body;
  }

  /** tools protocol: a reply to a request that offered tools says which calls it made, none included */
  private callsOf(request: ModelRequest, calls: ModelToolCall[]): Pick<ModelResponse, 'tool_calls'> {
    return this.protocol === 'tools' && request.tools?.length ? { tool_calls: calls } : {};
  }

  private async whole(
    body: OpenAI.ChatCompletionCreateParamsNonStreaming,
    request: ModelRequest,
    signal: AbortSignal,
  ): Promise<ModelResponse> {
    const res = await this.client.chat.completions.create(body, { signal });
    const message = res.choices[0]?.message;
    const content = message?.content ?? '';
    return {
      content,
      usage: usageOf(res.usage) ?? estimatedUsage(request.messages, content),
      model: res.model || body.model,
      finish_reason: res.choices[0]?.finish_reason ?? null,
      ...this.callsOf(request, functionCalls(message?.tool_calls)),
    };
  }

  private async streamed(
    body: OpenAI.ChatCompletionCreateParamsNonStreaming,
    request: ModelRequest,
    signal: AbortSignal,
    touch: () => void,
  ): Promise<ModelResponse> {
    const stream = await this.client.chat.completions.create(
      { ...body, stream: true, stream_options: { include_usage: true } },
      { signal },
    );
    const calls = new ToolCallAssembler();
    let content = '';
    let usage: TokenUsage | null = null;
    let finish: string | null = null;
    let served = body.model;
    for await (const chunk of stream) {
      touch();
      served = chunk.model || served;
      usage = usageOf(chunk.usage) ?? usage;
      const choice = chunk.choices[0];
      if (choice?.finish_reason) finish = choice.finish_reason;
      calls.feed(choice?.delta?.tool_calls);
      const delta = choice?.delta?.content;
      if (delta) {
        content += delta;
        request.onChunk?.(delta);
      }
    }
    return {
      content,
      usage: usage ?? estimatedUsage(request.messages, content),
      model: served,
      finish_reason: finish,
      ...this.callsOf(request, calls.result()),
    };
  }
}
