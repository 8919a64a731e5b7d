import { CriticModel } from '@runledger/critic';
import { ModelBackend } from './model-backend';

/**
 * The critic role of a model backend as the judges (critic, answer evaluator) call it; null when
 * no model serves the role. `cursor` says which critic answer of a recording a replay gives back;
 * `model` names the model as the recording did.
 */
export function criticModelOf(
  backend: ModelBackend,
  options: { cursor?: number; model?: string } = {},
): CriticModel | null {
  const name = options.model ?? backend.modelFor('critic');
  if (!name) return null;
  return {
    model: name,
    backend: backend.backend,
    async complete(messages, { timeout_ms, signal }) {
      const res = await backend.complete({
        role: 'critic',
        messages,
        timeout_ms,
        signal,
        ...(options.cursor !== undefined ? { cursor: options.cursor } : {}),
      });
      return { content: res.content, usage: res.usage, model: res.model };
    },
  };
}
