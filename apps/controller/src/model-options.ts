import { resolve } from 'node:path';
import { Role } from '@runledger/contracts';
import {
  ModelBackend,
  ModelOptions,
  OpenAiBackend,
  OpenAiBackendOptions,
  ResponsesBackend,
  ScriptedBackend,
  SysUtilBackend,
} from '@runledger/runtime';
import { AppConfig } from './config';

/** RUNLEDGER_MODEL_API -> the backend speaking that API of an OpenAI-compatible server. */
const openAiCompatible = (config: AppConfig, options: OpenAiBackendOptions): ModelBackend =>
  config.RUNLEDGER_MODEL_API === 'responses' ? new ResponsesBackend(options) : new OpenAiBackend(options);

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
  return openAiCompatible(config, {
    baseURL: config.OPENAI_BASE_URL,
    apiKey: config.OPENAI_API_KEY,
    models,
    protocol: config.RUNLEDGER_MODEL_PROTOCOL,
    stream: config.RUNLEDGER_MODEL_STREAM === 'on',
    toolCalls: config.RUNLEDGER_MODEL_TOOL_CALLS,
  });
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
  return (config.RUNLEDGER_FALLBACK_MODELS ?? []).map((p) =>
    openAiCompatible(config, {
      baseURL: p.base_url,
      apiKey: p.api_key_env ? env[p.api_key_env] : undefined,
      models: { orchestrator: p.model },
      label: p.name,
      protocol: config.RUNLEDGER_MODEL_PROTOCOL,
      stream: config.RUNLEDGER_MODEL_STREAM === 'on',
      toolCalls: config.RUNLEDGER_MODEL_TOOL_CALLS,
    }),
  );
}

export const modelOptionsFromConfig = (config: AppConfig, env: NodeJS.ProcessEnv): ModelOptions => ({
  model: modelFromConfig(config),
  fallbackModels: fallbackModelsFromConfig(config, env),
});
