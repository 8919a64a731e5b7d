import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { ConfigError, ModelContinuation, ModelToolCall, ROLES, Role, TokenUsage } from '@runledger/contracts';
import {
  MODEL_ERROR_KINDS,
  ModelBackend,
  ModelCallError,
  ModelRequest,
  ModelResponse,
  estimatedUsage,
  sleep,
} from './model-backend';

const ScriptItem = z.union([
  z.string(),
  z
    .object({
      error: z.enum(MODEL_ERROR_KINDS),
      message: z.string().optional(),
      retry_after_ms: z.number().nonnegative().optional(),
    })
    .strict(),
  z
    .object({
      content: z.string(),
      usage: z
        .object({
          prompt_tokens: z.number().int().nonnegative(),
          completion_tokens: z.number().int().nonnegative(),
          estimated: z.boolean().optional(),
        })
        .optional(),
      delay_ms: z.number().int().nonnegative().optional(),
      model: z.string().optional(),
      finish_reason: z.string().nullable().optional(),
      /** how the content arrives when streamed; the whole content in one piece when absent */
      chunks: z.array(z.string()).optional(),
      /** native tool calls of the reply: a role whose script has any speaks the tools protocol (text alone is then the answer) */
      tool_calls: z.array(ModelToolCall).optional(),
      /** a recorded Responses API call's continuation, given back as recorded (replay) */
      continuation: ModelContinuation.optional(),
      /** the model's reasoning returned beside the content */
      reasoning: z.string().optional(),
      /** how the reasoning arrives when streamed, before the content; the whole reasoning in one piece when absent */
      reasoning_chunks: z.array(z.string()).optional(),
    })
    .strict(),
]);
export type ScriptItem = z.infer<typeof ScriptItem>;
export const ModelScript = z
  .object(
    Object.fromEntries(ROLES.map((r) => [r, z.array(ScriptItem).optional()])) as Record<
      Role,
      z.ZodOptional<z.ZodArray<typeof ScriptItem>>
    >,
  )
  .strict();
export type ModelScript = Partial<Record<Role, ScriptItem[]>>;

/**
 * Responses read from a script, one list per role, for tests and demos. A
 * request that says which call of its task it is (`cursor`) gets that item, so
 * a task resumed after a restart continues where its log left off; otherwise
 * items are handed out in order. An exhausted script is a provider error.
 */
export class ScriptedBackend extends ModelBackend {
  readonly backend: string;
  private readonly next: Partial<Record<Role, number>> = {};

  private readonly inProcess: boolean;

  /**
   * `backend` names the adapter on MODEL_CALLED and keys the per-task call
   * cursor: two scripted providers in one fallback chain need different names.
   * A script stands in for a provider unless `answersInProcess` says it is
   * the model itself (see ModelBackend.answersInProcess).
   */
  constructor(
    private readonly script: ModelScript,
    options: { backend?: string; answersInProcess?: boolean } = {},
  ) {
    super();
    this.backend = options.backend ?? 'scripted';
    this.inProcess = options.answersInProcess ?? false;
  }

  override get answersInProcess(): boolean {
    return this.inProcess;
  }

  static fromFile(path: string): ScriptedBackend {
    let raw: unknown;
    try {
      raw = JSON.parse(readFileSync(path, 'utf8'));
    } catch (e) {
      throw new ConfigError(`RUNLEDGER_MODEL: cannot read script ${path}: ${(e as Error).message}`);
    }
    const parsed = ModelScript.safeParse(raw);
    if (!parsed.success)
      throw new ConfigError(
        `RUNLEDGER_MODEL: invalid script ${path}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
      );
    return new ScriptedBackend(parsed.data as ModelScript);
  }

  modelFor(role: Role): string | null {
    return this.script[role] ? this.backend : null;
  }

  override speaksToolCalls(role: Role): boolean {
    return (this.script[role] ?? []).some((i) => typeof i === 'object' && 'tool_calls' in i && i.tool_calls);
  }

  async complete(request: ModelRequest): Promise<ModelResponse> {
    const items = this.script[request.role] ?? [];
    const index = request.cursor ?? this.next[request.role] ?? 0;
    this.next[request.role] = index + 1;
    const item = items[index];
    if (item === undefined)
      throw new ModelCallError(
        'provider_error',
        `script for ${request.role} exhausted after ${items.length} responses`,
      );
    if (typeof item === 'string')
      return this.respond(
        request,
        item,
        undefined,
        null,
        this.backend,
        [item],
        this.toolCallsOf(request.role, []),
      );
    if ('error' in item)
      throw new ModelCallError(
        item.error,
        item.message ?? `scripted ${item.error}`,
        item.retry_after_ms ?? null,
      );
    if (item.delay_ms) await this.delay(item.delay_ms, request);
    const usage = item.usage
      ? {
          ...item.usage,
          total_tokens: item.usage.prompt_tokens + item.usage.completion_tokens,
          estimated: item.usage.estimated ?? false,
        }
      : undefined;
    return this.respond(
      request,
      item.content,
      usage,
      item.finish_reason ?? null,
      item.model ?? this.backend,
      item.chunks ?? [item.content],
      item.tool_calls ?? this.toolCallsOf(request.role, []),
      item.continuation,
      item.reasoning,
      item.reasoning_chunks ?? (item.reasoning ? [item.reasoning] : []),
    );
  }

  /** a text reply of a role that speaks the tools protocol made no call; other roles' replies carry no tool_calls at all */
  private toolCallsOf(role: Role, calls: ModelToolCall[]): ModelToolCall[] | undefined {
    return this.speaksToolCalls(role) ? calls : undefined;
  }

  private async delay(ms: number, request: ModelRequest): Promise<void> {
    if (ms >= request.timeout_ms) {
      await sleep(request.timeout_ms, request.signal).catch(() => undefined);
      throw new ModelCallError('timeout', `model call timed out after ${request.timeout_ms} ms`);
    }
    await sleep(ms, request.signal).catch(() => {
      throw new ModelCallError('provider_error', 'model call aborted');
    });
  }

  private respond(
    request: ModelRequest,
    content: string,
    usage: TokenUsage | undefined,
    finish: string | null,
    model: string,
    chunks: string[],
    tool_calls: ModelToolCall[] | undefined,
    continuation?: ModelContinuation,
    reasoning?: string,
    reasoningChunks: readonly string[] = [],
  ): ModelResponse {
    if (request.stream) {
      for (const c of reasoningChunks) if (c) request.onReasoningChunk?.(c);
      for (const c of chunks) if (c) request.onChunk?.(c);
    }
    return {
      content,
      usage: usage ?? estimatedUsage(request.messages, content),
      model,
      finish_reason: finish,
      ...(tool_calls ? { tool_calls } : {}),
      ...(continuation ? { continuation } : {}),
      ...(reasoning ? { reasoning } : {}),
    };
  }
}
