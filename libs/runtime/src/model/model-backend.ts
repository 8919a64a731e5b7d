import { RunledgerError, Role, TokenUsage } from '@runledger/contracts';
import { estimateUsage } from '../discipline/budgets';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
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
}

/**
 * The same prompt as `messages`, structured, for backends that need no model
 * (sys_util) and so cannot read prose.
 */
export interface PromptView {
  input: string;
  history: HistoryItem[];
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
  view?: PromptView;
  /** which call of this role within its task this is (0-based), from the log; lets scripted and replayed models resume */
  cursor?: number;
}

export interface ModelResponse {
  content: string;
  usage: TokenUsage;
  model: string;
  finish_reason: string | null;
}

export const MODEL_ERROR_KINDS = [
  'provider_error',
  'rate_limited',
  'timeout',
  'authentication_error',
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
