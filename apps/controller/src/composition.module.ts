import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { DynamicModule, Module, OnApplicationBootstrap, Provider } from '@nestjs/common';
import { Logger } from 'pino';
import { Critic, CriticModule } from '@runledger/critic';
import {
  MemoryModule,
  MemoryPolicy,
  MemoryService,
  createCriticMemoryHook,
  createMemoryEndGuard,
} from '@runledger/memory';
import { PermissionsModule, scrubProviderKeys } from '@runledger/permissions';
import {
  ModelBackend,
  ModelModule,
  RuntimeLogger,
  RuntimeModule,
  RuntimeOptions,
  StderrRuntimeLogger,
  LiveWorkspaceView,
  disciplineSettingsFrom,
} from '@runledger/runtime';
import { SchedulerModule } from '@runledger/scheduler';
import { CheckpointStore, StorageModule } from '@runledger/state-store';
import { ToolSandbox, ToolsModule, redactSecrets } from '@runledger/tools';
import {
  APP_CONFIG,
  AppConfig,
  dataDirOf,
  privateFoldersOf,
  providerKeyNames,
  storageOptionsFrom,
} from './config';
import {
  criticOptionsFromConfig,
  memoryOptionsFromConfig,
  memoryReachOf,
  recallOver,
  toolsOver,
} from './memory/memory-options';
import { modelOptionsFromConfig } from './model-options';
import { loadOrCreateSecretsKey, secretsKeyFile } from './secrets-key';
import { TelemetryModule } from './telemetry/telemetry.module';
import { ALLOWED_ROOT, LOGGER, PROCESS_ENV } from './tokens';

export interface CompositionOptions {
  config: AppConfig;
  /** RUNLEDGER_ALLOWED_ROOT unset: the CLI uses its working directory, the server ./data/workspace */
  defaultAllowedRoot: string;
  /** the server's pino logger: the runtime, tools and memory log through it; without one (CLI) they write to stderr */
  log?: Logger;
  /** where the fallback providers' api_key_env variables are read; process.env when absent */
  env?: NodeJS.ProcessEnv;
  /** what running without the OS sandbox also means here, said in its one warning line (the CLI's --yes) */
  sandboxNotice?: string;
}

/**
 * Once every provider is built the model clients hold their keys: the environment they were read from
 * drops them, before any task runs (resumed ones included), so plugin code and child processes of the
 * server and the CLI alike do not find them.
 */
class ProviderKeyScrub implements OnApplicationBootstrap {
  constructor(
    private readonly config: AppConfig,
    private readonly env: NodeJS.ProcessEnv,
  ) {}

  onApplicationBootstrap(): void {
    scrubProviderKeys(this.env, providerKeyNames(this.config));
  }
}

/** What every lib module's factory may inject: the parsed config, the logger, the environment, the allowed root. */
@Module({})
class AppCoreModule {
  static forRoot(o: CompositionOptions): DynamicModule {
    const providers: Provider[] = [
      { provide: APP_CONFIG, useValue: o.config },
      { provide: PROCESS_ENV, useValue: o.env ?? process.env },
      {
        provide: ALLOWED_ROOT,
        useFactory: () => {
          const root = resolve(o.config.RUNLEDGER_ALLOWED_ROOT ?? o.defaultAllowedRoot);
          mkdirSync(root, { recursive: true });
          return root;
        },
      },
      {
        provide: ProviderKeyScrub,
        useFactory: (env: NodeJS.ProcessEnv) => new ProviderKeyScrub(o.config, env),
        inject: [PROCESS_ENV],
      },
      // pino's logger has RuntimeLogger's shape: the runtime's reports carry task_id as a field
      { provide: RuntimeLogger, useValue: o.log ?? new StderrRuntimeLogger() },
    ];
    if (o.log) providers.push({ provide: LOGGER, useValue: o.log });
    return {
      module: AppCoreModule,
      global: true,
      providers,
      exports: [APP_CONFIG, PROCESS_ENV, ALLOWED_ROOT, RuntimeLogger, ...(o.log ? [LOGGER] : [])],
    };
  }
}

/**
 * The one composition of the runtime, for the HTTP app and the CLI alike: the
 * lib modules, each fed from the config by its forRootAsync factory. Shutdown
 * order: the runtime stops (onModuleDestroy), memory saves its index and the
 * finished tasks' traces are flushed (beforeApplicationShutdown), then the
 * storage closes (onApplicationShutdown).
 */
@Module({})
export class CompositionModule {
  static forRoot(o: CompositionOptions): DynamicModule {
    return {
      module: CompositionModule,
      imports: [
        AppCoreModule.forRoot(o),
        StorageModule.forRootAsync({
          inject: [APP_CONFIG],
          useFactory: storageOptionsFrom,
        }),
        ModelModule.forRootAsync({ inject: [APP_CONFIG, PROCESS_ENV], useFactory: modelOptionsFromConfig }),
        CriticModule.forRootAsync({
          inject: [APP_CONFIG, ModelBackend],
          useFactory: criticOptionsFromConfig,
        }),
        MemoryModule.forRootAsync({
          inject: [APP_CONFIG],
          useFactory: (c: AppConfig) => memoryOptionsFromConfig(c, o.log),
        }),
        PermissionsModule.forRootAsync({
          inject: [APP_CONFIG, ALLOWED_ROOT],
          useFactory: (c: AppConfig, allowedRoot: string) => ({
            allowedRoot,
            rules: c.RUNLEDGER_PERMISSION_RULES,
          }),
        }),
        ToolsModule.forRootAsync({
          inject: [APP_CONFIG, ALLOWED_ROOT, MemoryService, MemoryPolicy, PROCESS_ENV],
          useFactory: (
            c: AppConfig,
            allowedRoot: string,
            memory: MemoryService | null,
            policy: MemoryPolicy,
            env: NodeJS.ProcessEnv,
          ) => ({
            allowedRoot,
            sandbox: c.RUNLEDGER_SANDBOX,
            sandboxNotice: o.sandboxNotice,
            plugins: c.RUNLEDGER_PLUGINS,
            maxOutputBytes: c.RUNLEDGER_TOOL_OUTPUT_MAX_BYTES,
            memory: memory ? toolsOver(memory, policy.config, memoryReachOf(c)) : null,
            logger: o.log,
            mcp: {
              servers: c.RUNLEDGER_MCP_SERVERS ?? [],
              // beside the database, out of the tools' reach like the database itself
              blobDir: resolve(dirname(resolve(c.RUNLEDGER_DB)), 'mcp-blobs'),
              privateFolders: privateFoldersOf(c),
              env,
            },
          }),
        }),
        SchedulerModule.forRootAsync({
          inject: [APP_CONFIG],
          useFactory: (c: AppConfig) => ({ stepConcurrency: c.RUNLEDGER_STEP_CONCURRENCY }),
        }),
        RuntimeModule.forRootAsync({
          inject: [APP_CONFIG, Critic, MemoryService, MemoryPolicy, ToolSandbox, CheckpointStore],
          useFactory: (
            c: AppConfig,
            critic: Critic | null,
            memory: MemoryService | null,
            policy: MemoryPolicy,
            sandbox: ToolSandbox,
            checkpoints: CheckpointStore,
          ): RuntimeOptions => ({
            maxRounds: c.RUNLEDGER_MAX_ROUNDS,
            concurrency: c.RUNLEDGER_CONCURRENCY,
            backpressure: {
              maxQueued: c.RUNLEDGER_QUEUE_MAX,
              maxPendingSubmissions: c.RUNLEDGER_SUBMIT_MAX_PENDING,
              maxLoopDelayMs: c.RUNLEDGER_OVERLOAD_LOOP_DELAY_MS,
              maxLoopUtilization: c.RUNLEDGER_OVERLOAD_LOOP_UTILIZATION,
              maxLoopUtilizationForStarts: c.RUNLEDGER_TASK_START_LOOP_UTILIZATION,
              maxStartWaitMs: c.RUNLEDGER_TASK_START_MAX_WAIT_MS,
            },
            modelTimeoutMs: c.RUNLEDGER_MODEL_TIMEOUT_MS,
            coderToolTurns: c.RUNLEDGER_CODER_TOOL_TURNS,
            todos: c.RUNLEDGER_TODOS === 'on',
            roundPolicy: c.RUNLEDGER_ROUND_POLICY === 'on',
            answerEvaluator: c.RUNLEDGER_EVALUATOR,
            agents: c.RUNLEDGER_AGENTS ?? [],
            maxDelegationDepth: c.RUNLEDGER_MAX_DELEGATION_DEPTH,
            redact: redactSecrets,
            discipline: disciplineSettingsFrom(c),
            // the critic scores each tool outcome, then the write policy decides what memory keeps
            hooks: critic ? [createCriticMemoryHook({ critic, memory, policy: policy.config })] : [],
            // writes a completed task's summary; after the run discipline's guard, which may still change the stop
            guards: memory ? [createMemoryEndGuard(memory, policy.config)] : [],
            memory: memory ? recallOver(memory, memoryReachOf(c)) : null,
            // the accept gate reads the allowed root through the sandbox (confined, symlinks resolved)
            workspace: new LiveWorkspaceView(sandbox),
            secretKey: loadOrCreateSecretsKey(secretsKeyFile(dataDirOf(c))),
            leases: { renewMs: c.RUNLEDGER_LEASE_RENEW_MS, ttlMs: c.RUNLEDGER_LEASE_TTL_MS },
            checkpoints:
              c.RUNLEDGER_CHECKPOINTS === 'on'
                ? { store: checkpoints, everyEvents: c.RUNLEDGER_CHECKPOINT_EVERY_EVENTS }
                : null,
          }),
        }),
        TelemetryModule,
      ],
    };
  }
}
