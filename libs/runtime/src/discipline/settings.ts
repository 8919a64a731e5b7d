import { Budgets, PriceTable } from '@runledger/contracts';
import { DEFAULT_CHARS_PER_TOKEN } from '../model/usage-estimate';

/**
 * Tuning of every run-discipline guard. The controller builds it from its
 * config (`disciplineSettingsFrom`); tests pass their own.
 */

/** Budgets with every limit decided; a null cost budget means no cost limit. */
export interface ResolvedBudgets {
  max_rounds: number;
  max_tool_calls: number;
  /** per role: each of orchestrator, coder, critic, utility may call its model this often */
  max_model_calls: number;
  max_failures: number;
  max_tokens: number;
  max_cost_usd: number | null;
  timeout_ms: number;
}
export type BudgetKey = keyof ResolvedBudgets;
export const BUDGET_KEYS: readonly BudgetKey[] = [
  'max_rounds',
  'max_tool_calls',
  'max_model_calls',
  'max_failures',
  'max_tokens',
  'max_cost_usd',
  'timeout_ms',
];

export interface PromptSettings {
  contextWindowTokens: number;
  /** completion tokens reserved out of the window */
  maxTokens: number;
  /** fraction of the remaining window kept free for estimation error */
  safetyMargin: number;
  /** the memory section never takes more than this fraction of the prompt budget */
  memoryShare: number;
  /** the newest history items never trimmed or compacted */
  keepRecentHistory: number;
  /** a trim may drop at most this many old history items; more than that is compacted instead */
  maxTrimItems: number;
  /** the size the utility role is asked to keep a compaction summary under */
  summaryTokens: number;
  /**
   * when history overflows, no single tool output keeps more than this
   * fraction of the history section (the rest is elided, head and tail kept)
   */
  toolOutputShare: number;
}

export interface RetrySettings {
  /** retries of one model request after provider_error / rate_limited / timeout */
  modelRetries: number;
  /** retries of an idempotent tool call */
  toolRetries: number;
  baseDelayMs: number;
  maxDelayMs: number;
  /** a Retry-After longer than this is not waited for: fall back or stop instead */
  maxRetryAfterMs: number;
}

/** No retries at all: what a model or tool request gets without run discipline. */
export const NO_RETRIES: RetrySettings = {
  modelRetries: 0,
  toolRetries: 0,
  baseDelayMs: 0,
  maxDelayMs: 0,
  maxRetryAfterMs: 0,
};

export interface DisciplineSettings {
  budgetDefaults: ResolvedBudgets;
  budgetMaximums: ResolvedBudgets;
  prices: PriceTable;
  /** characters per token when a provider reports no usage */
  charsPerToken: number;
  prompt: PromptSettings;
  retry: RetrySettings;
  circuitBreakerThreshold: number;
  toolTimeoutBackoffFactor: number;
  toolTimeoutCapMs: number;
  modelTimeoutMs: number;
  streamIdleTimeoutMs: number;
  completionMaxMisses: number;
  repeatThreshold: number;
}

export const DEFAULT_BUDGETS: ResolvedBudgets = {
  max_rounds: 10,
  max_tool_calls: 50,
  max_model_calls: 30,
  max_failures: 10,
  max_tokens: 200_000,
  max_cost_usd: null,
  timeout_ms: 900_000,
};

export const DEFAULT_BUDGET_MAXIMUMS: ResolvedBudgets = {
  max_rounds: 100,
  max_tool_calls: 500,
  max_model_calls: 300,
  max_failures: 100,
  max_tokens: 2_000_000,
  max_cost_usd: null,
  timeout_ms: 3_600_000,
};

export const DEFAULT_DISCIPLINE_SETTINGS: DisciplineSettings = {
  budgetDefaults: DEFAULT_BUDGETS,
  budgetMaximums: DEFAULT_BUDGET_MAXIMUMS,
  prices: {},
  charsPerToken: DEFAULT_CHARS_PER_TOKEN,
  prompt: {
    contextWindowTokens: 8192,
    maxTokens: 1024,
    safetyMargin: 0.1,
    memoryShare: 0.2,
    keepRecentHistory: 2,
    maxTrimItems: 2,
    summaryTokens: 300,
    toolOutputShare: 0.5,
  },
  retry: { modelRetries: 2, toolRetries: 1, baseDelayMs: 500, maxDelayMs: 20_000, maxRetryAfterMs: 60_000 },
  circuitBreakerThreshold: 3,
  toolTimeoutBackoffFactor: 2,
  toolTimeoutCapMs: 300_000,
  modelTimeoutMs: 120_000,
  streamIdleTimeoutMs: 30_000,
  completionMaxMisses: 3,
  repeatThreshold: 2,
};

/** The config variables the guards read; the controller's AppConfig satisfies this structurally. */
export interface DisciplineConfigVars {
  RUNLEDGER_MAX_ROUNDS?: number;
  RUNLEDGER_BUDGET_DEFAULTS?: Budgets;
  RUNLEDGER_BUDGET_MAXIMUMS?: Budgets;
  RUNLEDGER_PRICE_TABLE?: PriceTable;
  RUNLEDGER_CHARS_PER_TOKEN?: number;
  RUNLEDGER_CONTEXT_WINDOW_TOKENS?: number;
  RUNLEDGER_MAX_COMPLETION_TOKENS?: number;
  RUNLEDGER_PROMPT_SAFETY_MARGIN?: number;
  RUNLEDGER_MODEL_RETRIES?: number;
  RUNLEDGER_TOOL_RETRIES?: number;
  RUNLEDGER_RETRY_BASE_MS?: number;
  RUNLEDGER_RETRY_MAX_MS?: number;
  RUNLEDGER_RETRY_AFTER_MAX_MS?: number;
  RUNLEDGER_CIRCUIT_BREAKER_THRESHOLD?: number;
  RUNLEDGER_TOOL_TIMEOUT_CAP_MS?: number;
  RUNLEDGER_MODEL_TIMEOUT_MS?: number;
  RUNLEDGER_STREAM_IDLE_TIMEOUT_MS?: number;
  RUNLEDGER_COMPLETION_MAX_MISSES?: number;
  RUNLEDGER_REPEAT_THRESHOLD?: number;
}

const withBudgets = (base: ResolvedBudgets, over: Budgets | undefined): ResolvedBudgets => ({
  ...base,
  ...(over ?? {}),
});

export function disciplineSettingsFrom(vars: DisciplineConfigVars): DisciplineSettings {
  const d = DEFAULT_DISCIPLINE_SETTINGS;
  // RUNLEDGER_MAX_ROUNDS is the loop's hard cap: the default and the most a task may ask for.
  const rounds = vars.RUNLEDGER_MAX_ROUNDS !== undefined ? { max_rounds: vars.RUNLEDGER_MAX_ROUNDS } : {};
  return {
    budgetDefaults: withBudgets({ ...d.budgetDefaults, ...rounds }, vars.RUNLEDGER_BUDGET_DEFAULTS),
    budgetMaximums: withBudgets({ ...d.budgetMaximums, ...rounds }, vars.RUNLEDGER_BUDGET_MAXIMUMS),
    prices: vars.RUNLEDGER_PRICE_TABLE ?? d.prices,
    charsPerToken: vars.RUNLEDGER_CHARS_PER_TOKEN ?? d.charsPerToken,
    prompt: {
      ...d.prompt,
      contextWindowTokens: vars.RUNLEDGER_CONTEXT_WINDOW_TOKENS ?? d.prompt.contextWindowTokens,
      maxTokens: vars.RUNLEDGER_MAX_COMPLETION_TOKENS ?? d.prompt.maxTokens,
      safetyMargin: vars.RUNLEDGER_PROMPT_SAFETY_MARGIN ?? d.prompt.safetyMargin,
    },
    retry: {
      modelRetries: vars.RUNLEDGER_MODEL_RETRIES ?? d.retry.modelRetries,
      toolRetries: vars.RUNLEDGER_TOOL_RETRIES ?? d.retry.toolRetries,
      baseDelayMs: vars.RUNLEDGER_RETRY_BASE_MS ?? d.retry.baseDelayMs,
      maxDelayMs: vars.RUNLEDGER_RETRY_MAX_MS ?? d.retry.maxDelayMs,
      maxRetryAfterMs: vars.RUNLEDGER_RETRY_AFTER_MAX_MS ?? d.retry.maxRetryAfterMs,
    },
    circuitBreakerThreshold: vars.RUNLEDGER_CIRCUIT_BREAKER_THRESHOLD ?? d.circuitBreakerThreshold,
    toolTimeoutBackoffFactor: d.toolTimeoutBackoffFactor,
    toolTimeoutCapMs: vars.RUNLEDGER_TOOL_TIMEOUT_CAP_MS ?? d.toolTimeoutCapMs,
    modelTimeoutMs: vars.RUNLEDGER_MODEL_TIMEOUT_MS ?? d.modelTimeoutMs,
    streamIdleTimeoutMs: vars.RUNLEDGER_STREAM_IDLE_TIMEOUT_MS ?? d.streamIdleTimeoutMs,
    completionMaxMisses: vars.RUNLEDGER_COMPLETION_MAX_MISSES ?? d.completionMaxMisses,
    repeatThreshold: vars.RUNLEDGER_REPEAT_THRESHOLD ?? d.repeatThreshold,
  };
}
