import { resolve } from 'node:path';
import { Role } from '@runledger/contracts';
import {
  ModelBackend,
  ModelOptions,
  OpenAiBackend,
  ScriptedBackend,
  SysUtilBackend,
} from '@runledger/runtime';
import { AppConfig } from './config';

/** RUNLEDGER_MODEL -> the backend serving every role. */
export function modelFromConfig(config: AppConfig): ModelBackend {
  const spec = config.RUNLEDGER_MODEL;
  if (spec === 'sys_util') return new SysUtilBackend();
  if (spec.startsWith('scripted:')) return ScriptedBackend.fromFile(resolve(spec.slice('scripted:'.length)));
  const models: Partial<Record<Role, string>> = {
    orchestrator: config.RUNLEDGER_MODEL_ORCHESTRATOR,
    coder: config.RUNLEDGER_MODEL_CODER,
    critic: config.RUNLEDGER_MODEL_CRITIC,
    utility: config.RUNLEDGER_MODEL_UTILITY,
  };
  return new OpenAiBackend({ baseURL: config.OPENAI_BASE_URL, apiKey: config.OPENAI_API_KEY, models });
}

/**
 * RUNLEDGER_FALLBACK_MODELS -> the fallback providers, in order. A key is read
 * from the variable its entry names, here and nowhere else: it goes to the
 * client, never into the config, an event or a log line.
 */
export function fallbackModelsFromConfig(
  config: AppConfig,
  env: NodeJS.ProcessEnv = process.env,
): ModelBackend[] {
  return (config.RUNLEDGER_FALLBACK_MODELS ?? []).map(
    (p) =>
      new OpenAiBackend({
        baseURL: p.base_url,
        apiKey: p.api_key_env ? env[p.api_key_env] : undefined,
        models: { orchestrator: p.model },
        label: p.name,
      }),
  );
}

export const modelOptionsFromConfig = (config: AppConfig, env: NodeJS.ProcessEnv): ModelOptions => ({
  model: modelFromConfig(config),
  fallbackModels: fallbackModelsFromConfig(config, env),
});
