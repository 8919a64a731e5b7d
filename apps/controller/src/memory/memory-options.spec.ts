import { AppConfig, loadConfig } from '../config';
import { HashingEmbedder, OpenAIEmbedder, embedderFrom } from '@runledger/memory';
import { HeuristicCritic, ModelCritic, criticFrom } from '@runledger/critic';
import { ModelBackend, ScriptedBackend, SysUtilBackend } from '@runledger/runtime';
import { criticOptionsFromConfig, embedderOptionsFromConfig, policyFromConfig } from './memory-options';

// what the lib modules build from the options the config maps to
const criticFromConfig = (c: AppConfig, model: ModelBackend) => criticFrom(criticOptionsFromConfig(c, model));
const embedderFromConfig = (c: AppConfig) => embedderFrom(embedderOptionsFromConfig(c));

const config = (env: Record<string, string> = {}) => loadConfig({ RUNLEDGER_DB: '/tmp/x.db', ...env });
const scripted = (withCritic: boolean) =>
  new ScriptedBackend(withCritic ? { critic: ['{}'] } : { orchestrator: ['{}'] });

describe('memory composition from config', () => {
  it.each([
    ['auto, no critic model -> heuristic', {}, scripted(false), HeuristicCritic],
    ['auto, sys_util -> heuristic', {}, new SysUtilBackend(), HeuristicCritic],
    ['auto, a model serves the critic role -> model', {}, scripted(true), ModelCritic],
    ['heuristic forced', { RUNLEDGER_CRITIC: 'heuristic' }, scripted(true), HeuristicCritic],
  ] as const)('%s', (_name, env, model, kind) => {
    expect(criticFromConfig(config(env), model)).toBeInstanceOf(kind);
  });

  it('off means no critic; model without a critic model stops the boot naming the variable', () => {
    expect(criticFromConfig(config({ RUNLEDGER_CRITIC: 'off' }), scripted(true))).toBeNull();
    expect(() => criticFromConfig(config({ RUNLEDGER_CRITIC: 'model' }), scripted(false))).toThrow(
      /RUNLEDGER_CRITIC=model/,
    );
  });

  it('picks the embedder and policy thresholds', () => {
    expect(embedderFromConfig(config({ RUNLEDGER_EMBEDDING_DIM: '128' }))).toMatchObject({
      model: 'runledger-hash-v1',
      dim: 128,
    });
    expect(
      embedderFromConfig(
        config({
          RUNLEDGER_EMBEDDER: 'openai',
          OPENAI_BASE_URL: 'http://127.0.0.1:1/v1',
          RUNLEDGER_EMBEDDING_MODEL: 'e5',
        }),
      ),
    ).toBeInstanceOf(OpenAIEmbedder);
    expect(() => embedderFromConfig(config({ RUNLEDGER_EMBEDDER: 'openai' }))).toThrow(
      /RUNLEDGER_EMBEDDING_MODEL/,
    );
    expect(embedderFromConfig(config())).toBeInstanceOf(HashingEmbedder);
    expect(
      policyFromConfig(
        config({ RUNLEDGER_MEMORY_MIN_WEIGHT: '0.3', RUNLEDGER_MEMORY_DEDUP_THRESHOLD: '0.9' }),
      ),
    ).toMatchObject({ min_weight: 0.3, dedup_threshold: 0.9 });
  });
});
