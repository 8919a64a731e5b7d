import { mkdirSync } from 'node:fs';
import { Kysely } from 'kysely';
import { resolve } from 'node:path';
import { Role } from '@runledger/contracts';
import { EventBus, EventStore, SqliteEventStore, openSqlite } from '@runledger/event-store';
import { migrateToLatest } from '@runledger/migrations';
import { PermissionPolicy } from '@runledger/permissions';
import {
  LoopGuard,
  MemoryRecall,
  ModelBackend,
  OpenAiBackend,
  Runtime,
  RuntimeService,
  ScriptedBackend,
  SysUtilBackend,
  ToolOutcomeHook,
  createRuntime,
} from '@runledger/runtime';
import { ToolRegistry } from '@runledger/tools';
import { AllowAllPolicy, testToolRegistry } from '../../../libs/runtime/src/testing';
import { AppConfig } from './config';
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
  /** the folder tools may touch */
  allowedRoot: string;
  /** critic + memory (null when the store was overridden: no SQLite handle to keep memory in) */
  memory: BuiltMemory | null;
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
  log?: (message: string, err?: unknown) => void;
}

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

async function openStore(config: AppConfig): Promise<{ store: EventStore; db: Kysely<unknown> | null; close: () => Promise<void> }> {
  const handle = openSqlite({ path: resolve(config.RUNLEDGER_DB), synchronous: config.RUNLEDGER_SQLITE_SYNCHRONOUS });
  await migrateToLatest(handle.db);
  return { store: new SqliteEventStore(handle), db: handle.db as Kysely<unknown>, close: () => handle.close() };
}

/**
 * Storage, tools, permission policy and model from the config, wired into one
 * RuntimeService. Overrides replace single parts (tests, the memory lib's recall).
 * Does not resume unfinished tasks: the caller decides when (service.resumeUnfinished()).
 */
export async function buildRuntime(config: AppConfig, overrides: RuntimeOverrides = {}): Promise<BuiltRuntime> {
  const allowedRoot = resolve(config.RUNLEDGER_ALLOWED_ROOT ?? overrides.defaultAllowedRoot ?? './data/workspace');
  mkdirSync(allowedRoot, { recursive: true });
  const opened = overrides.store ? { store: overrides.store, db: null, close: async () => undefined } : await openStore(config);
  const store = opened.store;
  const bus = new EventBus(store);
  const tools = overrides.tools ?? testToolRegistry(allowedRoot);
  const permissions = overrides.permissions ?? new AllowAllPolicy();
  const model = overrides.model ?? modelFromConfig(config);
  const memory = opened.db ? await buildMemory(config, { db: opened.db, store, model }) : null;
  const runtime = createRuntime({
    store,
    tools,
    permissions,
    model,
    memory: overrides.memory ?? memory?.recall ?? undefined,
    hooks: [...(overrides.hooks ?? []), ...(memory?.hook ? [memory.hook] : [])],
    guards: overrides.guards,
    maxRounds: config.RUNLEDGER_MAX_ROUNDS,
    concurrency: config.RUNLEDGER_CONCURRENCY,
    stepConcurrency: config.RUNLEDGER_STEP_CONCURRENCY,
    modelTimeoutMs: config.RUNLEDGER_MODEL_TIMEOUT_MS,
    log: overrides.log,
  });
  return {
    config,
    store,
    bus,
    service: runtime.service,
    runtime,
    tools,
    permissions,
    model,
    allowedRoot,
    memory,
    close: async () => {
      await runtime.service.close();
      await memory?.close();
      bus.close();
      await opened.close();
    },
  };
}
