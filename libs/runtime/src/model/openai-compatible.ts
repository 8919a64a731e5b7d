import type OpenAI from 'openai';
import type { APIError } from 'openai';
import { ModelToolCall, Role } from '@runledger/contracts';
import { ModelBackend, ModelCallError, ModelRequest, ModelResponse, ToolCallSettings } from './model-backend';
import { createDeadline } from './deadline';
import { providerLabel } from './providers';

export const MODEL_PROTOCOLS = ['tools', 'json'] as const;
export type ModelProtocol = (typeof MODEL_PROTOCOLS)[number];

/**
 * The openai client package, required when the first backend on an OpenAI-compatible server is
 * made (or one of its errors is read): a process without such a model does not load it.
 */
// eslint-disable-next-line @typescript-eslint/no-require-imports
export const openAiSdk = () => require('openai') as typeof import('openai');

/** Which of the server's APIs a backend speaks: chat completions or responses (RUNLEDGER_MODEL_API). */
export const MODEL_APIS = ['chat', 'responses'] as const;
export type ModelApi = (typeof MODEL_APIS)[number];

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

/** An error the server reported by its code and message alone (a failed response, a stream's error event). */
export function errorFromCode(code: string | null | undefined, message: string): ModelCallError {
  if (code && AUTH_CODES.includes(code)) return new ModelCallError('authentication_error', message);
  if (code && RATE_LIMIT_CODES.includes(code)) return new ModelCallError('rate_limited', message);
  return new ModelCallError('provider_error', message);
}

/** The openai client's errors in the failure taxonomy's words: by status, else by the body's code or type. */
export function toModelCallError(err: unknown, timeoutMs: number): ModelCallError {
  if (err instanceof ModelCallError) return err;
  const { APIConnectionTimeoutError, APIError, APIUserAbortError } = openAiSdk();
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

/** A 400 that names the structured-output parameter: the server does not do structured output. */
export const refusesStructuredOutput = (err: unknown): boolean =>
  err instanceof openAiSdk().APIError &&
  err.status === 400 &&
  /response_format|json_schema|text\.format/i.test(err.message);

/**
 * What every backend on an OpenAI-compatible server shares, whichever API it
 * speaks: the client (no retries of its own), models per role, its label, and
 * the layered deadline of a call. A subclass sends the request.
 */
export abstract class OpenAiCompatibleBackend extends ModelBackend {
  protected readonly client: OpenAI;
  protected readonly protocol: ModelProtocol;
  /** the server answered the structured-output parameter with a 400 once: later requests carry the directive in text only */
  protected structuredOutputRefused = false;

  constructor(protected readonly options: OpenAiBackendOptions) {
    super();
    // Retries are the run-discipline policy's decision, recorded as events, never the client's.
    this.client = new (openAiSdk().OpenAI)({
      baseURL: options.baseURL,
      apiKey: options.apiKey || 'unset',
      maxRetries: 0,
    });
    this.protocol = options.protocol ?? 'tools';
  }

  /** the same server and settings with these models */
  protected abstract withModels(models: Partial<Record<Role, string>>): OpenAiCompatibleBackend;

  /** one request to the server; `touch` is each sign of life of a stream */
  protected abstract send(
    model: string,
    request: ModelRequest,
    signal: AbortSignal,
    touch: () => void,
  ): Promise<ModelResponse>;

  override speaksToolCalls(): boolean {
    return this.protocol === 'tools';
  }

  modelFor(role: Role): string | null {
    return this.options.models[role] ?? this.options.models.orchestrator ?? null;
  }

  /** The same server with the orchestrator on `model`; the other roles keep the models they resolved to. */
  override withOrchestratorModel(model: string): OpenAiCompatibleBackend {
    const resolved = (role: Role) => this.modelFor(role) ?? undefined;
    return this.withModels({
      orchestrator: model,
      coder: resolved('coder'),
      critic: resolved('critic'),
      utility: resolved('utility'),
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
  protected streams(request: ModelRequest): boolean {
    return request.stream === true && this.options.stream !== false;
  }

  /** tool_choice / parallel_tool_calls for the request: the role's configured ones, the request's own choice over them */
  protected toolChoiceOf(request: ModelRequest): ToolCallSettings {
    const settings = this.options.toolCalls?.[request.role] ?? {};
    return {
      ...(settings.tool_choice ? { tool_choice: settings.tool_choice } : {}),
      ...(request.tool_choice ? { tool_choice: request.tool_choice } : {}),
      ...(settings.parallel_tool_calls !== undefined
        ? { parallel_tool_calls: settings.parallel_tool_calls }
        : {}),
    };
  }

  /** tools protocol: a reply to a request that offered tools says which calls it made, none included */
  protected callsOf(request: ModelRequest, calls: ModelToolCall[]): Pick<ModelResponse, 'tool_calls'> {
    return this.protocol === 'tools' && request.tools?.length ? { tool_calls: calls } : {};
  }

  /**
   * json protocol: structured output first (`key` of the body); a server that refuses it is asked
   * again without it, and from then on never with it.
   */
  protected async withStructuredOutput<B extends object, R>(
    body: B,
    key: keyof B,
    call: (body: B) => Promise<R>,
  ): Promise<R> {
    if (body[key] === undefined) return call(body);
    try {
      return await call(body);
    } catch (err) {
      if (!refusesStructuredOutput(err)) throw err;
      this.structuredOutputRefused = true;
      const plain = { ...body };
      delete plain[key];
      return call(plain);
    }
  }

  /** tools are sent: the tools protocol and a request that offers some */
  protected offersTools(request: ModelRequest): boolean {
    return this.protocol === 'tools' && Boolean(request.tools && request.tools.length > 0);
  }
}
