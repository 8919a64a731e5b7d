import { RuntimeEvent, StopReason } from '@runledger/contracts';
import { RetrySettings } from './settings';
import { FAILURE_KINDS, FailureError, FailureKind } from '../model/failure-error';

/**
 * The failure taxonomy, in one place: what an error is (`classifyFailure`) and
 * what to do about it (`decideFailure`). Everything else asks here.
 */
const isFailureKind = (v: unknown): v is FailureKind =>
  typeof v === 'string' && (FAILURE_KINDS as readonly string[]).includes(v);

export interface ClassifiedFailure {
  kind: FailureKind;
  /** false when repeating the same request cannot help (e.g. a 400 from the provider) */
  retryable: boolean;
  retry_after_ms: number | null;
  message: string;
}

const RETRYABLE: readonly FailureKind[] = ['provider_error', 'rate_limited', 'timeout', 'tool_error'];

/** Retry-After as seconds (possibly fractional) or an HTTP date; null when absent or unreadable. */
export function parseRetryAfter(value: string | null | undefined, now: number = Date.now()): number | null {
  if (value === null || value === undefined || value.trim() === '') return null;
  const v = value.trim();
  if (/^\d+(\.\d+)?$/.test(v)) return Math.round(Number(v) * 1000);
  const at = Date.parse(v);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

const header = (headers: unknown, name: string): string | null => {
  if (!headers || typeof headers !== 'object') return null;
  const h = headers as { get?: (n: string) => string | null } & Record<string, unknown>;
  if (typeof h.get === 'function') return h.get(name);
  const hit = Object.keys(h).find((k) => k.toLowerCase() === name);
  return hit === undefined ? null : String(h[hit]);
};

/** Retry-After of an HTTP error (openai APIError carries `headers`), preferring the millisecond form. */
export function retryAfterOf(err: unknown, now: number = Date.now()): number | null {
  if (err instanceof FailureError) return err.retryAfterMs;
  const o = err as { headers?: unknown; retry_after_ms?: unknown } | null;
  if (!o || typeof o !== 'object') return null;
  if (typeof o.retry_after_ms === 'number') return o.retry_after_ms;
  const ms = header(o.headers, 'retry-after-ms');
  if (ms !== null && /^\d+(\.\d+)?$/.test(ms.trim())) return Math.round(Number(ms));
  return parseRetryAfter(header(o.headers, 'retry-after'), now);
}

const TIMEOUT_CODES = ['ETIMEDOUT', 'ESOCKETTIMEDOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT'];
const NETWORK_CODES = [
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'UND_ERR_SOCKET',
];

/**
 * What kind of failure an error is. `subject` decides the kind of an error
 * nothing else identifies: a model call's unknown error is a provider_error,
 * a tool's is a tool_error.
 */
export function classifyFailure(err: unknown, subject: 'model' | 'tool' = 'model'): ClassifiedFailure {
  const fallbackKind: FailureKind = subject === 'tool' ? 'tool_error' : 'provider_error';
  const message =
    err instanceof Error ? err.message : typeof err === 'string' ? err : JSON.stringify(err ?? null);
  const done = (kind: FailureKind, retryable = RETRYABLE.includes(kind)): ClassifiedFailure => ({
    kind,
    retryable,
    retry_after_ms: kind === 'rate_limited' || kind === 'provider_error' ? retryAfterOf(err) : null,
    message,
  });
  if (err === null || typeof err !== 'object') return done(fallbackKind);
  const o = err as { kind?: unknown; code?: unknown; name?: unknown; status?: unknown };
  if (isFailureKind(o.kind)) return done(o.kind);
  if (isFailureKind(o.code)) return done(o.code);
  if (o.code === 'model_behavior_error') return done('validation_error');
  if (o.code === 'unauthorized' || o.code === 'forbidden') return done('authentication_error');
  const name = typeof o.name === 'string' ? o.name : '';
  if (name === 'TimeoutError' || name === 'APIConnectionTimeoutError') return done('timeout');
  if (name === 'AbortError' || name === 'APIUserAbortError') return done('cancelled');
  if (name === 'ZodError' || name === 'SyntaxError') return done('validation_error');
  if (typeof o.status === 'number') {
    const s = o.status;
    if (s === 401 || s === 403) return done('authentication_error');
    if (s === 408) return done('timeout');
    if (s === 429) return done('rate_limited');
    if (s >= 500) return done('provider_error');
    // Any other 4xx: the request itself is wrong; sending it again cannot help.
    if (s >= 400) return done('provider_error', false);
  }
  if (typeof o.code === 'string') {
    if (TIMEOUT_CODES.includes(o.code)) return done('timeout');
    if (NETWORK_CODES.includes(o.code)) return done('provider_error');
  }
  if (name === 'APIConnectionError') return done('provider_error');
  return done(fallbackKind);
}

/** Deterministic RNG (mulberry32) so backoff jitter is testable. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Exponential backoff with "equal jitter": half the exponential delay is kept,
 * the other half is random, so concurrent tasks spread out but none retries
 * immediately. A Retry-After from the server is a floor.
 */
export function backoffDelay(
  attempt: number,
  retry: Pick<RetrySettings, 'baseDelayMs' | 'maxDelayMs'>,
  rng: () => number,
  retryAfterMs: number | null = null,
): number {
  const exp = Math.min(retry.maxDelayMs, retry.baseDelayMs * 2 ** Math.max(0, attempt - 1));
  const jittered = Math.round(exp / 2 + rng() * (exp / 2));
  return Math.max(jittered, retryAfterMs ?? 0);
}

export type FailureDecision =
  | { action: 'retry'; kind: FailureKind; delay_ms: number; next_attempt: number; detail: string }
  | { action: 'fallback'; kind: FailureKind; to: string; detail: string }
  | { action: 'stop'; kind: FailureKind; stop_reason: StopReason; detail: string };

export interface DecideContext {
  subject: 'model' | 'tool';
  retry: RetrySettings;
  /** fallback targets not tried yet, next first (providers / roles for a model call) */
  fallbacks?: readonly string[];
  /** tools: the manifest declares the call safe to repeat */
  idempotent?: boolean;
  /** tools: the per-task circuit breaker for this tool is open */
  circuitOpen?: boolean;
  retryAfterMs?: number | null;
  /** false when the classification says repeating the request cannot help */
  retryable?: boolean;
  rng?: () => number;
}

/** The orchestrator decides what to do about a failed tool call that is not retried. */
export const TOOL_FALLBACK_TARGET = 'orchestrator';

/**
 * What to do after attempt number `attempt` (1-based) failed with `kind`.
 * - validation_error: never retried as is; the next fallback (the router's
 *   correction / sys_util path) or stop.
 * - provider_error / rate_limited / timeout on a model call: retry up to
 *   modelRetries with backoff, honouring Retry-After (one longer than
 *   maxRetryAfterMs is not waited for), then fall back, then stop.
 * - authentication_error: stop at once; another attempt or a fallback would
 *   only hide a configuration error.
 * - tool_error / timeout on a tool: retry only an idempotent tool; an open
 *   circuit stops the task; otherwise the orchestrator is told.
 * - budget_exceeded, cancelled: stop.
 */
export function decideFailure(kind: FailureKind, attempt: number, ctx: DecideContext): FailureDecision {
  const rng = ctx.rng ?? Math.random;
  const fallbacks = ctx.fallbacks ?? [];
  const stop = (detail: string, stop_reason: StopReason = kind): FailureDecision => ({
    action: 'stop',
    kind,
    stop_reason,
    detail,
  });
  const fallbackOrStop = (why: string): FailureDecision =>
    fallbacks.length > 0
      ? { action: 'fallback', kind, to: fallbacks[0], detail: `${why}; falling back to ${fallbacks[0]}` }
      : stop(`${why}; no fallback left`);

  switch (kind) {
    case 'authentication_error':
      return stop('the provider refused the credentials; not retried');
    case 'budget_exceeded':
    case 'cancelled':
      return stop(kind === 'cancelled' ? 'cancelled' : 'a budget ran out');
    case 'validation_error':
      return fallbackOrStop('invalid output is never executed or retried as is');
    case 'tool_error':
      return decideTool(kind, attempt, ctx, rng);
    case 'timeout':
      if (ctx.subject === 'tool') return decideTool(kind, attempt, ctx, rng);
      return decideModel(kind, attempt, ctx, rng, fallbackOrStop);
    case 'provider_error':
    case 'rate_limited':
      return decideModel(kind, attempt, ctx, rng, fallbackOrStop);
  }
}

function decideModel(
  kind: FailureKind,
  attempt: number,
  ctx: DecideContext,
  rng: () => number,
  fallbackOrStop: (why: string) => FailureDecision,
): FailureDecision {
  const retryAfter = ctx.retryAfterMs ?? null;
  if (ctx.retryable === false) return fallbackOrStop(`${kind} that a retry cannot fix`);
  if (retryAfter !== null && retryAfter > ctx.retry.maxRetryAfterMs) {
    return fallbackOrStop(
      `server asks to wait ${retryAfter} ms, longer than the ${ctx.retry.maxRetryAfterMs} ms we wait`,
    );
  }
  if (attempt <= ctx.retry.modelRetries) {
    const delay_ms = backoffDelay(attempt, ctx.retry, rng, retryAfter);
    return {
      action: 'retry',
      kind,
      delay_ms,
      next_attempt: attempt + 1,
      detail: `${kind} on attempt ${attempt}; retry ${attempt} of ${ctx.retry.modelRetries} in ${delay_ms} ms${retryAfter !== null ? ` (Retry-After ${retryAfter} ms)` : ''}`,
    };
  }
  return fallbackOrStop(`${kind} after ${attempt} attempts`);
}

function decideTool(
  kind: FailureKind,
  attempt: number,
  ctx: DecideContext,
  rng: () => number,
): FailureDecision {
  if (ctx.circuitOpen)
    return {
      action: 'stop',
      kind,
      stop_reason: 'tool_error',
      detail: 'the tool failed repeatedly and its circuit breaker is open',
    };
  if (ctx.idempotent && attempt <= ctx.retry.toolRetries) {
    const delay_ms = backoffDelay(attempt, ctx.retry, rng);
    return {
      action: 'retry',
      kind,
      delay_ms,
      next_attempt: attempt + 1,
      detail: `${kind} on attempt ${attempt} of an idempotent tool; retry in ${delay_ms} ms`,
    };
  }
  const why = ctx.idempotent
    ? `${kind} after ${attempt} attempts`
    : `${kind} of a tool not declared idempotent; not retried`;
  return { action: 'fallback', kind, to: TOOL_FALLBACK_TARGET, detail: `${why}; the orchestrator is told` };
}

/** Per-task health of each tool: circuit breaker and adaptive timeouts, folded from the log. */
export interface ToolGuardState {
  consecutiveFailures: Record<string, number>;
  /** timeouts seen per tool signature (args_hash of TOOL_CALLED) */
  timeouts: Record<string, number>;
  /**
   * Signature of each call with an intent and no outcome yet, for the timeout
   * its outcome may report. Only calls in flight: the step stays O(1) however
   * long the task runs.
   */
  pendingSignatures: Record<string, string>;
}

export const initialToolGuardState = (): ToolGuardState => ({
  consecutiveFailures: {},
  timeouts: {},
  pendingSignatures: {},
});

/** The output of a command that ran to its end (it reports an exit code). */
export const hasExitCode = (output: unknown): boolean =>
  !!output &&
  typeof output === 'object' &&
  ['exit_code', 'exitCode', 'code'].some((k) => typeof (output as Record<string, unknown>)[k] === 'number');

const settled = (pending: Record<string, string>, callId: string): Record<string, string> => {
  if (!(callId in pending)) return pending;
  const { [callId]: _done, ...rest } = pending;
  return rest;
};

/**
 * A failure counts toward the breaker when the tool itself broke (threw, timed
 * out). A command that ran and exited non-zero is a fact about the command, not
 * a broken tool (a test run failing three times while a bug is fixed must not
 * trip it); refusals (permission, invalid args) are the caller's doing.
 */
export function toolGuardEvolve(state: ToolGuardState, event: RuntimeEvent): ToolGuardState {
  switch (event.type) {
    case 'TOOL_CALLED':
      return {
        ...state,
        pendingSignatures: { ...state.pendingSignatures, [event.payload.call_id]: event.payload.args_hash },
      };
    case 'TOOL_COMPLETED': {
      const { tool, result, call_id } = event.payload;
      const broke = !result.ok && !hasExitCode(result.output);
      return {
        ...state,
        pendingSignatures: settled(state.pendingSignatures, call_id),
        consecutiveFailures: {
          ...state.consecutiveFailures,
          [tool]: broke ? (state.consecutiveFailures[tool] ?? 0) + 1 : 0,
        },
      };
    }
    case 'TOOL_FAILED': {
      const { tool, error_kind, call_id, result } = event.payload;
      const pendingSignatures = settled(state.pendingSignatures, call_id);
      if (error_kind !== 'tool_error' && error_kind !== 'timeout') return { ...state, pendingSignatures };
      const ranFine = error_kind === 'tool_error' && result !== null && hasExitCode(result.output);
      const next = {
        ...state,
        pendingSignatures,
        consecutiveFailures: {
          ...state.consecutiveFailures,
          [tool]: ranFine ? 0 : (state.consecutiveFailures[tool] ?? 0) + 1,
        },
      };
      const sig = state.pendingSignatures[call_id];
      if (error_kind === 'timeout' && sig)
        next.timeouts = { ...state.timeouts, [sig]: (state.timeouts[sig] ?? 0) + 1 };
      return next;
    }
    default:
      return state;
  }
}

export const toolGuardFromEvents = (events: readonly RuntimeEvent[]): ToolGuardState =>
  events.reduce(toolGuardEvolve, initialToolGuardState());

export const isCircuitOpen = (state: ToolGuardState, tool: string, threshold: number): boolean =>
  (state.consecutiveFailures[tool] ?? 0) >= threshold;

/** Timeout for a call: the manifest's, doubled (factor) per earlier timeout of the same signature, capped. */
export function adaptiveToolTimeout(
  state: ToolGuardState,
  signature: string,
  manifestTimeoutMs: number,
  factor: number,
  capMs: number,
): number {
  const n = state.timeouts[signature] ?? 0;
  if (n === 0) return manifestTimeoutMs;
  return Math.min(Math.max(capMs, manifestTimeoutMs), Math.round(manifestTimeoutMs * factor ** n));
}
