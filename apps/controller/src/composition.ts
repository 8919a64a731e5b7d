import { mkdirSync } from 'node:fs';
import { Kysely } from 'kysely';
import { resolve } from 'node:path';
import { Role } from '@runledger/contracts';
import { EventBus, EventStore } from '@runledger/event-store';
import { PermissionPolicy, RulePermissionPolicy } from '@runledger/permissions';
import { SqliteStorage, createSqliteStorage } from '@runledger/state-store';
import {
  LoopGuard,
  MemoryRecall,
  ModelBackend,
  OpenAiBackend,
  Runtime,
  RuntimeService,
  ScriptedBackend,
  SysUtilBackend,
  RuntimeOptions,
  TaskProgress,
  ToolOutcomeHook,
  LiveWorkspaceView,
  createRuntime,
  disciplineSettingsFrom,
  replayTask,
} from '@runledger/runtime';
import { ToolLogger, ToolRegistry, ToolSandbox, createToolLayer, redactSecrets } from '@runledger/tools';
import { AppConfig } from './config';
import { loadOrCreateSecretsKey, secretsKeyFile } from './secrets-key';
import { BuiltMemory, buildMemory } from './memory/memory.composition';

/** What the CLI and the HTTP app share: one store, one runtime. */
export interface BuiltRuntime {
  config: AppConfig;
  store: EventStore;
  bus: EventBus;
  service: RuntimeService;
  runtime: Runtime;
  tools: ToolRegistry;
  permissions: PermissionPolicy;
  model: ModelBackend;
  /** RUNLEDGER_FALLBACK_MODELS: asked in order when `model` fails as orchestrator, before sys_util */
  fallbackModels: ModelBackend[];
  /** the folder tools may touch */
  allowedRoot: string;
  /** critic + memory (null when the store was overridden: no SQLite handle to keep memory in) */
  memory: BuiltMemory | null;
  /** task-state projection, checkpoints (null when the store was overridden) */
  storage: SqliteStorage | null;
  /** null when the tools were overridden */
  sandbox: ToolSandbox | null;
  /** re-run a recorded task offline as a new task (models and tools answer from its log) */
  replay(taskId: string): Promise<{ task_id: string; progress: TaskProgress }>;
  close(): Promise<void>;
}

export interface RuntimeOverrides {
  store?: EventStore;
  tools?: ToolRegistry;
  permissions?: PermissionPolicy;
  model?: ModelBackend;
  memory?: MemoryRecall;
  hooks?: ToolOutcomeHook[];
  guards?: LoopGuard[];
  /** RUNLEDGER_ALLOWED_ROOT unset: the CLI uses its working directory, the server ./data/workspace */
  defaultAllowedRoot?: string;
  /** where the fallback providers' api_key_env variables are read; process.env when absent */
  env?: NodeJS.ProcessEnv;
  log?: (message: string, err?: unknown) => void;
}

/** Tool-layer warnings (plugins skipped, sandbox fallback) through the runtime's log when one is given. */
const toolLogger = (log: RuntimeOverrides['log']): ToolLogger | undefined =>
  log && { warn: (obj: object, msg: string) => log(`${msg} ${JSON.stringify(obj)}`) };

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

/**
 * Storage, tools, permission policy and model from the config, wired into one
 * RuntimeService. Overrides replace single parts (tests, the memory lib's recall).
 * Does not resume unfinished tasks: the caller decides when (service.resumeUnfinished()).
 */
export async function buildRuntime(
  config: AppConfig,
  overrides: RuntimeOverrides = {},
): Promise<BuiltRuntime> {
  const allowedRoot = resolve(
    config.RUNLEDGER_ALLOWED_ROOT ?? overrides.defaultAllowedRoot ?? './data/workspace',
  );
  mkdirSync(allowedRoot, { recursive: true });
  const storage = overrides.store
    ? null
    : await createSqliteStorage({
        path: resolve(config.RUNLEDGER_DB),
        synchronous: config.RUNLEDGER_SQLITE_SYNCHRONOUS,
      });
  const store: EventStore = overrides.store ?? storage!.eventStore;
  const bus = storage?.bus ?? new EventBus(store);
  const model = overrides.model ?? modelFromConfig(config);
  const fallbackModels = fallbackModelsFromConfig(config, overrides.env);
  const memory = storage
    ? await buildMemory(config, { db: storage.db as Kysely<unknown>, store, model })
    : null;
  const layer = overrides.tools
    ? null
    : createToolLayer({
        allowedRoot,
        sandbox: config.RUNLEDGER_SANDBOX,
        plugins: config.RUNLEDGER_PLUGINS,
        maxOutputBytes: config.RUNLEDGER_TOOL_OUTPUT_MAX_BYTES,
        memory: memory?.tools ?? null,
        logger: toolLogger(overrides.log),
      });
  const tools = overrides.tools ?? layer!.registry;
  const permissions =
    overrides.permissions ??
    new RulePermissionPolicy({ allowedRoot, rules: config.RUNLEDGER_PERMISSION_RULES });
  const options: RuntimeOptions = {
    store,
    tools,
    permissions,
    model,
    fallbackModels,
    memory: overrides.memory ?? memory?.recall ?? undefined,
    hooks: [...(overrides.hooks ?? []), ...(memory?.hook ? [memory.hook] : [])],
    guards: [...(overrides.guards ?? []), ...(memory?.endGuard ? [memory.endGuard] : [])],
    maxRounds: config.RUNLEDGER_MAX_ROUNDS,
    concurrency: config.RUNLEDGER_CONCURRENCY,
    stepConcurrency: config.RUNLEDGER_STEP_CONCURRENCY,
    modelTimeoutMs: config.RUNLEDGER_MODEL_TIMEOUT_MS,
    redact: redactSecrets,
    secretKey: storage ? loadOrCreateSecretsKey(secretsKeyFile(config.RUNLEDGER_DB)) : undefined,
    discipline: disciplineSettingsFrom(config),
    // the accept gate reads the allowed root through a sandbox (confined, symlinks resolved)
    workspace: new LiveWorkspaceView(
      layer?.sandbox ?? new ToolSandbox({ allowedRoot, mode: 'process', bwrapPath: null }),
    ),
    log: overrides.log,
  };
  const runtime = createRuntime(options);
  return {
    config,
    store,
    bus,
    service: runtime.service,
    runtime,
    tools,
    permissions,
    model,
    fallbackModels,
    allowedRoot,
    memory,
    storage,
    sandbox: layer?.sandbox ?? null,
    replay: (taskId) => replayTask(options, taskId),
    close: async () => {
      await runtime.service.close();
      await memory?.close();
      if (storage) await storage.close();
      else bus.close();
    },
  };
}
