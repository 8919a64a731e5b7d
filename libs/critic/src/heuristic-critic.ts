import { CriticScore } from '@runledger/contracts';
import { Critic, CriticInput, CriticVerdict } from './critic';

const outputText = (output: unknown): string =>
  typeof output === 'string' ? output : output == null ? '' : JSON.stringify(output);

const exitCodeOf = (input: CriticInput): number | null => {
  const fromMeta = input.metadata.exit_code;
  if (typeof fromMeta === 'number') return fromMeta;
  const out = input.output as { exit_code?: unknown } | null;
  return out && typeof out === 'object' && typeof out.exit_code === 'number' ? out.exit_code : null;
};

/**
 * Stands in when no critic model is configured: judges only what it can see
 * (ok/error, exit code, output size) and says so in its notes.
 */
export class HeuristicCritic extends Critic {
  readonly kind = 'heuristic' as const;

  async evaluate(input: CriticInput): Promise<CriticVerdict> {
    return { critic: 'heuristic', score: heuristicScore(input), error: null, exchange: null };
  }
}

/** Pure, so it is table-tested. */
export function heuristicScore(input: CriticInput): CriticScore {
  const size = outputText(input.output).trim().length;
  const exit = exitCodeOf(input);
  const succeeded = input.ok && (exit === null || exit === 0);
  const notes = [
    `heuristic critic (no critic model): ok=${input.ok}`,
    exit === null ? null : `exit_code=${exit}`,
    `output_chars=${size}`,
  ];
  if (!succeeded) {
    return {
      correctness: 0.1,
      usefulness: 0.3,
      safety: 1,
      memory_store: Boolean(input.error),
      weight: 0.3,
      notes: [...notes, 'failed: kept as a lesson'].filter(Boolean).join('; '),
    };
  }
  // Empty output teaches nothing; a huge dump is mostly noise for recall.
  const usefulness = size === 0 ? 0.1 : size > 20_000 ? 0.4 : 0.7;
  return {
    correctness: 0.8,
    usefulness,
    safety: 1,
    memory_store: size > 0,
    weight: Number((0.3 + 0.5 * usefulness).toFixed(3)),
    notes: notes.filter(Boolean).join('; '),
  };
}
