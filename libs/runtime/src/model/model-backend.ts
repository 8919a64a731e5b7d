import { ModelContinuation, ModelToolCall, RunledgerError, Role, TokenUsage } from '@runledger/contracts';
import { estimateUsage } from './usage-estimate';

/**
 * One message of a conversation. Tool turns (native tool calling) are an
 * assistant message carrying `tool_calls`, then one `tool` message per call
 * answering its `tool_call_id`; see tool-turns.ts for the rules.
 */
export type ChatMessage =
  | { role: 'system' | 'user'; content: string }
  | { role: 'assistant'; content: string; tool_calls?: ModelToolCall[] }
  | { role: 'tool'; content: string; tool_call_id: string };

/** A function the model may call natively: a tool of the registry, or one of the runtime's own (plan, fail). */
export interface ToolFunction {
  name: string;
  description: string;
  /** JSON schema of the arguments object */
  parameters: Record<string, unknown>;
}

/** Per role (configured): OpenAI `tool_choice` and whether one reply may carry several calls. */
export interface ToolCallSettings {
  tool_choice?: 'auto' | 'required' | 'none';
  parallel_tool_calls?: boolean;
}

/** One earlier round as the context shows it: what was decided and what came of it. */
export interface HistoryItem {
  round: number;
  directive: unknown;
  /** tool / step results in log order; text the model reads */
  results: string[];
  /** the event_id each result came from, by its index in `results` (absent for notes), to cite an elided output */
  sources?: Record<number, string>;
  /** true when every tool call of the round succeeded */
  ok: boolean;
  /** the native tool calls the round's directive was made of (tools protocol) */
  tool_calls?: ModelToolCall[];
}

/**
 * The same prompt as `messages`, structured, for backends that need no model
 * (sys_util) and so cannot read prose.
 */
export interface PromptView {
  input: string;
  history: HistoryItem[];
  /** why the configured model is not answering this call (sys_util stands in for it), if it is a fallback */
  fallback_reason?: string;
}

export interface ModelRequest {
  role: Role;
  messages: ChatMessage[];
  timeout_ms: number;
  /** streaming: the longest silence between chunks; timeout_ms when absent */
  idle_timeout_ms?: number;
  signal?: AbortSignal;
  /** stream the content; each delta goes to onChunk as it arrives */
  stream?: boolean;
  onChunk?: (delta: string) => void;
  /** streaming: each piece of the model's reasoning, when its server streams one apart from the content */
  onReasoningChunk?: (delta: string) => void;
  view?: PromptView;
  /** which call of this role within its task this is (0-based), from the log; lets scripted and replayed models resume */
  cursor?: number;
  /** functions the model may call natively; backends that speak the tools protocol send them as `tools`, the others ignore them */
  tools?: ToolFunction[];
  /** 'none': the tools are listed but none may be called this time (the round policy's answer_only round) */
  tool_choice?: 'none';
  /**
   * JSON protocol: the JSON schema the reply must follow, sent as
   * response_format where the server accepts it; the prompt says the same in text.
   */
  response_schema?: { name: string; schema: Record<string, unknown> };
  /** the model to ask in place of the role's configured one: a delegated agent's own (its profile's models) */
  model?: string;
  /**
   * Responses API: the last response of this conversation as the log recorded it (its id and the
   * items it saw); null or absent: none. Backends without stored conversations ignore it.
   */
  continuation?: ContinuationAnchor | null;
}

/** Where a stored conversation stands on the server: a response and the items it saw, its own output included. */
export type ContinuationAnchor = Pick<ModelContinuation, 'response_id' | 'items_hash' | 'item_count'>;

export interface ModelResponse {
  content: string;
  usage: TokenUsage;
  model: string;
  finish_reason: string | null;
  /**
   * Native tool calls of the reply. Present (possibly empty) exactly when the
   * backend spoke the tools protocol for this request; absent for a text-only reply.
   */
  tool_calls?: ModelToolCall[];
  /** the model's reasoning, when its server returned it apart from the content (reasoning_content / reasoning) */
  reasoning?: string;
  /** Responses API: how the request stood to the stored conversation (recorded on MODEL_RESPONDED) */
  continuation?: ModelContinuation;
}

/**
 * The reply stopped at the output token limit (finish_reason "length"): whatever it holds is cut
 * off, never a complete answer nor a directive to act on.
 */
export const cutOff = (res: Pick<ModelResponse, 'finish_reason'>): boolean => res.finish_reason === 'length';
export const CUT_OFF =
  'the reply was cut off at the output token limit (finish_reason "length"), so it is not a complete answer';

export const MODEL_ERROR_KINDS = [
  'provider_error',
  'rate_limited',
  'timeout',
  'authentication_error',
  /** the reply came, but not in a shape the log can record (the runtime's own event check refused it): never retried as is */
  'validation_error',
] as const;
export type ModelErrorKind = (typeof MODEL_ERROR_KINDS)[number];

/** Every way a model call can fail, in the failure taxonomy's words. */
export class ModelCallError extends RunledgerError {
  readonly code = 'model_call_error';
  constructor(
    readonly kind: ModelErrorKind,
    message: string,
    readonly retry_after_ms: number | null = null,
  ) {
    super(message, { kind, retry_after_ms });
  }
}

/** A chat model behind one role. Adapters: openai, scripted, replay, sys_util. */
export abstract class ModelBackend {
  /** adapter name, recorded on MODEL_CALLED */
  abstract readonly backend: string;
  /** the model name a role resolves to, or null when this backend does not serve the role */
  abstract modelFor(role: Role): string | null;
  abstract complete(request: ModelRequest): Promise<ModelResponse>;
  /**
   * True when the answer is computed in this process and nothing is sent
   * anywhere (sys_util): a call then changes nothing outside the task, so its
   * MODEL_CALLED needs no commit of its own before it and rides with the
   * reply, as a read-only tool's intent does. A replay answers as the
   * recorded providers did, committing first: its steps then interleave with
   * its children as the recording's did.
   */
  get answersInProcess(): boolean {
    return false;
  }
  /** true when this backend sends `tools` and answers with native tool calls for `role` */
  speaksToolCalls(_role: Role): boolean {
    return false;
  }
  /**
   * This backend with its orchestrator answering as `model` (a fork run with another model), or
   * null when it serves no other model (sys_util, scripted and replayed answers).
   */
  withOrchestratorModel(_model: string): ModelBackend | null {
    return null;
  }
  /**
   * The provider as events name it when a fallback switches between
   * providers (model name and host; never a key). Unique within a chain.
   */
  get label(): string {
    return this.modelFor('orchestrator') ?? this.backend;
  }
}

export const zeroUsage = (): TokenUsage => ({
  prompt_tokens: 0,
  completion_tokens: 0,
  total_tokens: 0,
  estimated: false,
});

/** Usage from characters (DEFAULT_CHARS_PER_TOKEN) when a provider reports none. */
export function estimatedUsage(messages: readonly ChatMessage[], content: string): TokenUsage {
  return estimateUsage(
    messages.reduce((n, m) => n + m.content.length, 0),
    content.length,
  );
}

export const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(t);
        reject(new Error('aborted'));
      },
      { once: true },
    );
  });
