import { AnswerEvaluatorSettings, Budgets, RunSettings, ToolBudget } from '@runledger/contracts';
import { resolveBudgets } from '../discipline/budgets';
import { DEFAULT_DISCIPLINE_SETTINGS, DisciplineSettings } from '../discipline/settings';

/** The settings of this process that shape a run; recorded per task in TASK_RECEIVED. */
export interface RunShaping {
  maxRounds: number;
  /** how many tool-call replies a coder step may make before it must answer in text */
  coderToolTurns?: number;
  discipline?: DisciplineSettings;
  /** todos offered from the first round (recorded only when on, so runs without them record what they did before) */
  todos?: boolean;
  /** round policy on (recorded only when on, like todos) */
  roundPolicy?: boolean;
  /** the orchestrator's own answers evaluated (recorded only when set) */
  answerEvaluator?: AnswerEvaluatorSettings;
  /** the tools' per-tool budgets, by name (recorded only when some tool declares one) */
  toolBudgets?: Record<string, ToolBudget>;
}

/** What a task asking for `budgets` runs under in this process, as TASK_RECEIVED records it. */
export function recordRunSettings(
  shaping: RunShaping,
  budgets: Budgets | undefined,
  modelProtocol: RunSettings['model_protocol'],
): RunSettings {
  const d = shaping.discipline;
  return {
    max_rounds: shaping.maxRounds,
    model_protocol: modelProtocol,
    ...(shaping.coderToolTurns !== undefined ? { coder_tool_turns: shaping.coderToolTurns } : {}),
    ...(shaping.todos ? { todos: 'on' as const } : {}),
    ...(shaping.roundPolicy ? { round_policy: 'on' as const } : {}),
    ...(shaping.answerEvaluator ? { answer_evaluator: shaping.answerEvaluator } : {}),
    ...(shaping.toolBudgets && Object.keys(shaping.toolBudgets).length
      ? { tool_budgets: shaping.toolBudgets }
      : {}),
    discipline: d
      ? {
          budgets: resolveBudgets(budgets, d.budgetDefaults, d.budgetMaximums).budgets,
          prices: d.prices,
          chars_per_token: d.charsPerToken,
          retry: {
            model_retries: d.retry.modelRetries,
            tool_retries: d.retry.toolRetries,
            base_delay_ms: d.retry.baseDelayMs,
            max_delay_ms: d.retry.maxDelayMs,
            max_retry_after_ms: d.retry.maxRetryAfterMs,
          },
          guards: {
            completion_max_misses: d.completionMaxMisses,
            repeat_threshold: d.repeatThreshold,
            circuit_breaker_threshold: d.circuitBreakerThreshold,
            tool_timeout_backoff_factor: d.toolTimeoutBackoffFactor,
            tool_timeout_cap_ms: d.toolTimeoutCapMs,
            model_timeout_ms: d.modelTimeoutMs,
            stream_idle_timeout_ms: d.streamIdleTimeoutMs,
          },
          prompt: {
            context_window_tokens: d.prompt.contextWindowTokens,
            max_tokens: d.prompt.maxTokens,
            safety_margin: d.prompt.safetyMargin,
            memory_share: d.prompt.memoryShare,
            keep_recent_history: d.prompt.keepRecentHistory,
            max_trim_items: d.prompt.maxTrimItems,
            summary_tokens: d.prompt.summaryTokens,
            tool_output_share: d.prompt.toolOutputShare,
          },
        }
      : null,
  };
}

/**
 * The process settings a recorded run ran under. Its resolved budgets become both the defaults and
 * the maximums, so the task's own request resolves to exactly what it resolved to when recorded.
 */
export function runShapingOf(recorded: RunSettings): Required<Pick<RunShaping, 'maxRounds'>> & RunShaping {
  const d = recorded.discipline;
  return {
    maxRounds: recorded.max_rounds,
    ...(recorded.coder_tool_turns !== undefined ? { coderToolTurns: recorded.coder_tool_turns } : {}),
    discipline: d
      ? {
          budgetDefaults: d.budgets,
          budgetMaximums: d.budgets,
          prices: d.prices,
          charsPerToken: d.chars_per_token,
          retry: {
            modelRetries: d.retry.model_retries,
            toolRetries: d.retry.tool_retries,
            baseDelayMs: d.retry.base_delay_ms,
            maxDelayMs: d.retry.max_delay_ms,
            maxRetryAfterMs: d.retry.max_retry_after_ms,
          },
          completionMaxMisses: d.guards.completion_max_misses,
          repeatThreshold: d.guards.repeat_threshold,
          circuitBreakerThreshold: d.guards.circuit_breaker_threshold,
          toolTimeoutBackoffFactor: d.guards.tool_timeout_backoff_factor,
          toolTimeoutCapMs: d.guards.tool_timeout_cap_ms,
          modelTimeoutMs: d.guards.model_timeout_ms,
          streamIdleTimeoutMs: d.guards.stream_idle_timeout_ms,
          prompt: {
            contextWindowTokens: d.prompt.context_window_tokens,
            maxTokens: d.prompt.max_tokens,
            safetyMargin: d.prompt.safety_margin,
            memoryShare: d.prompt.memory_share,
            keepRecentHistory: d.prompt.keep_recent_history,
            maxTrimItems: d.prompt.max_trim_items,
            summaryTokens: d.prompt.summary_tokens,
            toolOutputShare: d.prompt.tool_output_share ?? DEFAULT_DISCIPLINE_SETTINGS.prompt.toolOutputShare,
          },
        }
      : undefined,
  };
}
