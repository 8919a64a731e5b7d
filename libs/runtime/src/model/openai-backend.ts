import OpenAI, { APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import { Role, TokenUsage } from '@runledger/contracts';
import { ModelBackend, ModelCallError, ModelRequest, ModelResponse, estimatedUsage } from './model-backend';
import { createDeadline } from '../discipline/timeouts';
import { providerLabel } from './providers';

export interface OpenAiBackendOptions {
  baseURL?: string;
  apiKey?: string;
  /** model name per role; a role without one uses the orchestrator's */
  models: Partial<Record<Role, string>>;
  /** how events name this provider in a fallback chain; `<orchestrator model>@<host>` when absent */
  label?: string;
}

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

/** The openai client's errors in the failure taxonomy's words. */
export function toModelCallError(err: unknown, timeoutMs: number): ModelCallError {
  if (err instanceof ModelCallError) return err;
  if (err instanceof APIConnectionTimeoutError)
    return new ModelCallError('timeout', `model call timed out after ${timeoutMs} ms`);
  if (err instanceof APIUserAbortError) return new ModelCallError('timeout', 'model call aborted');
  if (err instanceof APIError) {
    if (err.status === 401 || err.status === 403)
      return new ModelCallError('authentication_error', err.message);
    if (err.status === 429) return new ModelCallError('rate_limited', err.message, retryAfterMs(err.headers));
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

/** Any OpenAI-compatible chat completions server: OpenAI, Ollama, vLLM, llama.cpp server. */
export class OpenAiBackend extends ModelBackend {
  readonly backend = 'openai';
  private readonly client: OpenAI;

  constructor(private readonly options: OpenAiBackendOptions) {
    super();
    // Retries are the run-discipline policy's decision, recorded as events, never the client's.
    this.client = new OpenAI({ baseURL: options.baseURL, apiKey: options.apiKey || 'unset', maxRetries: 0 });
  }

  modelFor(role: Role): string | null {
    return this.options.models[role] ?? this.options.models.orchestrator ?? null;
  }

  override get label(): string {
    return (
      this.options.label ?? providerLabel(this.modelFor('orchestrator') ?? 'openai', this.options.baseURL)
    );
  }

  async complete(request: ModelRequest): Promise<ModelResponse> {
    const model = this.modelFor(request.role);
    if (!model) throw new ModelCallError('provider_error', `no model configured for role ${request.role}`);
    // Layered: the whole request has timeout_ms; a stream also may not go silent for longer than
    // idle_timeout_ms (each chunk is a sign of life); the caller's signal (task deadline, cancel) wins over both.
    const deadline = createDeadline({
      totalMs: request.timeout_ms,
      idleMs: request.stream ? (request.idle_timeout_ms ?? request.timeout_ms) : null,
      parent: request.signal,
      label: 'model call',
    });
    const timedOut = () =>
      deadline.reason()?.kind === 'timeout' && !request.signal?.aborted ? deadline.reason() : null;
    try {
      const res = request.stream
        ? await this.streamed(model, request, deadline.signal, deadline.touch)
        : await this.whole(model, request, deadline.signal);
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

  private async whole(model: string, request: ModelRequest, signal: AbortSignal): Promise<ModelResponse> {
    const res = await this.client.chat.completions.create({ model, messages: request.messages }, { signal });
    const content = res.choices[0]?.message?.content ?? '';
    return {
      content,
      usage: usageOf(res.usage) ?? estimatedUsage(request.messages, content),
      model: res.model || model,
      finish_reason: res.choices[0]?.finish_reason ?? null,
    };
  }

  private async streamed(
    model: string,
    request: ModelRequest,
    signal: AbortSignal,
    touch: () => void,
  ): Promise<ModelResponse> {
    const stream = await this.client.chat.completions.create(
      { model, messages: request.messages, stream: true, stream_options: { include_usage: true } },
      { signal },
    );
    let content = '';
    let usage: TokenUsage | null = null;
    let finish: string | null = null;
    let served = model;
    for await (const chunk of stream) {
      touch();
      served = chunk.model || served;
      usage = usageOf(chunk.usage) ?? usage;
      const choice = chunk.choices[0];
      if (choice?.finish_reason) finish = choice.finish_reason;
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
    };
  }
}
