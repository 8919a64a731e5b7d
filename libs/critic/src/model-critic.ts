import { z } from 'zod';
import { CriticScore, TokenUsage, newId } from '@runledger/contracts';
import { Critic, CriticExchange, CriticInput, CriticVerdict } from './critic';

export interface CriticMessage {
  role: 'system' | 'user';
  content: string;
}

/**
 * The critic role as the critic lib needs it. The composition root adapts the
 * runtime's ModelBackend to this, so critic never imports runtime.
 */
export interface CriticModel {
  readonly model: string;
  readonly backend: string;
  complete(
    messages: CriticMessage[],
    options: { timeout_ms: number; signal: AbortSignal },
  ): Promise<{
    content: string;
    usage?: TokenUsage;
    /** the model the server says answered */ model?: string;
  }>;
}

export const CRITIC_SYSTEM_PROMPT = [
  'You are the critic of Runledger. Judge the tool outcome below and reply with ONE JSON object only:',
  '{"correctness":0..1,"usefulness":0..1,"safety":0..1,"memory_store":true|false,"weight":0..1,"notes":"<short reason>"}',
  'memory_store: true when the outcome is worth remembering for later tasks; weight: how much it should count in recall.',
].join('\n');

const MAX_OUTPUT_CHARS = 4000;

export function criticPrompt(input: CriticInput): CriticMessage[] {
  const output = typeof input.output === 'string' ? input.output : JSON.stringify(input.output ?? null);
  const clipped =
    output.length > MAX_OUTPUT_CHARS ? `${output.slice(0, MAX_OUTPUT_CHARS)}…[truncated]` : output;
  return [
    { role: 'system', content: CRITIC_SYSTEM_PROMPT },
    {
      role: 'user',
      content: [
        `tool: ${input.tool}`,
        `ok: ${input.ok}`,
        `error: ${input.error ?? 'none'}`,
        `output:\n${clipped}`,
      ].join('\n'),
    },
  ];
}

/**
 * A judge's reply as the schema it must follow: JSON (a ```json fence tolerated) that
 * satisfies `schema`, or an error string naming `what` was expected.
 */
export function parseJudgeReply<T>(
  content: string,
  schema: z.ZodType<T>,
  judge: string,
  what: string,
): { value: T } | { error: string } {
  const fenced = /```(?:json)?\s*([\s\S]*?)```/.exec(content);
  const text = (fenced ? fenced[1] : content).trim();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { error: `${judge} reply is not JSON: ${JSON.stringify(content.slice(0, 120))}` };
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success)
    return {
      error: `${judge} reply is not ${what}: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`,
    };
  return { value: parsed.data };
}

/** Parse a critic reply: JSON (a ```json fence tolerated) that satisfies CriticScore, or an error string. */
export function parseCriticReply(content: string): { score: CriticScore } | { error: string } {
  const parsed = parseJudgeReply(content, CriticScore, 'critic', 'a CriticScore');
  return 'value' in parsed ? { score: parsed.value } : parsed;
}

const zeroUsage = (): TokenUsage => ({
  prompt_tokens: 0,
  completion_tokens: 0,
  total_tokens: 0,
  estimated: true,
});

const ERROR_KINDS = ['provider_error', 'rate_limited', 'timeout', 'authentication_error'] as const;

/**
 * The kind a failed model call names (a model backend's error carries `kind`; a replayed
 * call fails with the kind it recorded); provider_error when it names none.
 */
function errorKindOf(err: unknown): string {
  const kind = (err as { kind?: unknown } | null)?.kind;
  return ERROR_KINDS.find((k) => k === kind) ?? 'provider_error';
}

/** What a judge's model call came to: its reply (null when it failed, with `error` saying why) and the exchange to record. */
export interface JudgeReply {
  content: string | null;
  error: string | null;
  exchange: CriticExchange;
}

/**
 * One call of a judge (the critic, the answer evaluator) to the critic role's model, bounded by
 * `timeoutMs` even when the model ignores its signal. Never throws: a failure is a reply with an
 * error, and the exchange records the call either way, so a replay can answer it again.
 */
export async function askJudge(
  model: CriticModel,
  messages: CriticMessage[],
  timeoutMs: number,
  judge: string,
  signal?: AbortSignal,
): Promise<JudgeReply> {
  const controller = new AbortController();
  const onOuter = () => controller.abort(signal?.reason);
  signal?.addEventListener('abort', onOuter, { once: true });
  let timer: NodeJS.Timeout | undefined;
  // A model that ignores its signal must not hold the task: the timer settles the call.
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      controller.abort();
      reject(new Error(`${judge} timed out after ${timeoutMs} ms`));
    }, timeoutMs);
  });
  const started = Date.now();
  const exchange: CriticExchange = {
    call_id: newId('mc'),
    model: model.model,
    backend: model.backend,
    prompt_chars: messages.reduce((n, m) => n + m.content.length, 0),
    content: null,
    usage: zeroUsage(),
    latency_ms: 0,
    error: null,
  };
  try {
    const res = await Promise.race([
      model.complete(messages, { timeout_ms: timeoutMs, signal: controller.signal }),
      timeout,
    ]);
    exchange.content = res.content;
    exchange.usage = res.usage ?? zeroUsage();
    // as the gateway records a reply: by the model that served it (a replay's is the recording's)
    exchange.model = res.model ?? exchange.model;
    exchange.latency_ms = Date.now() - started;
    return { content: res.content, error: null, exchange };
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    exchange.latency_ms = Date.now() - started;
    exchange.error = {
      kind: controller.signal.aborted && !signal?.aborted ? 'timeout' : errorKindOf(err),
      message,
    };
    return { content: null, error: `${judge} failed: ${message}`, exchange };
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onOuter);
  }
}

/** Asks the critic role for a CriticScore; any failure (throw, timeout, non-JSON, out of range) is a verdict with an error. */
export class ModelCritic extends Critic {
  readonly kind = 'model' as const;

  constructor(
    private readonly model: CriticModel,
    private readonly timeoutMs = 15_000,
  ) {
    super();
  }

  async evaluate(input: CriticInput, signal?: AbortSignal): Promise<CriticVerdict> {
    const reply = await askJudge(this.model, criticPrompt(input), this.timeoutMs, 'critic', signal);
    if (reply.content === null)
      return { critic: 'model', score: null, error: reply.error, exchange: reply.exchange };
    const parsed = parseCriticReply(reply.content);
    return 'score' in parsed
      ? { critic: 'model', score: parsed.score, error: null, exchange: reply.exchange }
      : { critic: 'model', score: null, error: parsed.error, exchange: reply.exchange };
  }
}
