import { HeuristicCritic } from './heuristic-critic';
import { CriticModel, ModelCritic } from './model-critic';
import { runCriticConformance } from './testing/critic-conformance';

/** A critic model that answers every prompt with `reply` (or fails with it). */
const model = (reply: string | Error): CriticModel => ({
  model: 'critic-test',
  backend: 'scripted',
  complete: async (_messages, { signal }) => {
    signal.throwIfAborted();
    if (reply instanceof Error) throw reply;
    return {
      content: reply,
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, estimated: false },
    };
  },
});

const SCORE =
  '{"correctness":0.9,"usefulness":0.8,"safety":1,"memory_store":true,"weight":0.7,"notes":"fine"}';

runCriticConformance('HeuristicCritic', () => new HeuristicCritic());
runCriticConformance('ModelCritic answering a score', () => new ModelCritic(model(SCORE)));
runCriticConformance('ModelCritic answering prose', () => new ModelCritic(model('looks good to me')));
runCriticConformance(
  'ModelCritic whose model fails',
  () => new ModelCritic(model(new Error('connection refused'))),
);
