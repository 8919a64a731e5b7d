import { TokenUsage } from '@runledger/contracts';

/**
 * ~4 characters per token is the usual figure for English text and code with
 * OpenAI-style BPE tokenizers; it over-counts slightly for code-heavy prompts,
 * which errs on the side of stopping early rather than overrunning a budget.
 */
export const DEFAULT_CHARS_PER_TOKEN = 4;

/** Tokens from characters when a provider reports none (see DEFAULT_CHARS_PER_TOKEN). */
export function estimateTokens(chars: number, charsPerToken = DEFAULT_CHARS_PER_TOKEN): number {
  return chars <= 0 ? 0 : Math.ceil(chars / charsPerToken);
}

export function estimateUsage(
  promptChars: number,
  completionChars: number,
  charsPerToken = DEFAULT_CHARS_PER_TOKEN,
): TokenUsage {
  const prompt_tokens = estimateTokens(promptChars, charsPerToken);
  const completion_tokens = estimateTokens(completionChars, charsPerToken);
  return {
    prompt_tokens,
    completion_tokens,
    total_tokens: prompt_tokens + completion_tokens,
    estimated: true,
  };
}
