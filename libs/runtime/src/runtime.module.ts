import { DynamicModule, Module, Provider } from '@nestjs/common';
import { ConfigError, ModuleAsyncOptions, RunSettings, forRootAsyncModule } from '@runledger/contracts';
import { AgentCatalog } from './delegation/agent-catalog';
import { ChildTasks } from './delegation/child-tasks';
import { A2ARemoteAgents } from './delegation/a2a-remote-agents';
import { RemoteAgents } from './delegation/remote-agents';
import { TaskTree } from './delegation/task-tree';
import { DEFAULT_MAX_DELEGATION_DEPTH } from './delegation/delegation-runner';
import { EventStore } from '@runledger/event-store';
import { PermissionService } from '@runledger/permissions';
import { LeaseStore, TaskStateStore } from '@runledger/state-store';
import { ExecutionScheduler } from '@runledger/scheduler';
import { ToolRegistry, redactSecrets } from '@runledger/tools';
import { AsyncRouter, NO_RETRY_POLICY } from './loop/async-router';
import { ContextBuilder, DEFAULT_SECTION_BUDGETS } from './loop/context-builder';
import { DisciplineGuard } from './loop/guards/discipline-guard';
import { TodoGuard } from './loop/guards/todo-guard';
import { ExecutionEngine } from './loop/execution-engine';
import { ModelGateway } from './loop/model-gateway';
import { ModelBackend } from './model/model-backend';
import { duplicateLabel } from './model/providers';
import { SysUtilBackend } from './model/sys-util';
import { SYS_UTIL } from './model/sys-util-name';
import { MemoryRecall, NoMemoryRecall, SecretVault, ToolOutcomeHook, WALL_CLOCK } from './ports';
import { ReplayRequest, ReplayResult } from './control/runtime-controller';
import { LoopGuard } from './loop/guards/loop-guard';
import { ReplayOptions, runReplay } from './replay/replay-task';
import { ModelOptions, RuntimeOptions, RuntimeParts, RuntimeSettings } from './runtime-options';
import { recordRunSettings, runShapingOf } from './log/run-settings';
import { TaskOwnership } from './control/task-ownership';
import { RuntimeController } from './control/runtime-controller';
import { RunQueue } from './control/run-queue';
import { Admission } from './control/admission';
import { TaskAnswers } from './control/task-answers';
import { SessionQueue } from './control/session-queue';
import { Recovery } from './control/recovery';
import { loadProgress } from './log/checkpoints';
import { EventLoopMonitor, SubmissionPacing } from './loop/pacing';
import { RuntimeLogger } from './runtime-logger';
import { AnswerEvaluation } from './loop/guards/answer-evaluation';
import { RuntimeLoop, ShapedLoopParts } from './loop/runtime-loop';
import { toolBudgetsOf } from './loop/tool-budgets';
import { TaskCheckpoints } from './log/checkpoints';
import { LogTaskViews, ProjectionTaskViews, TaskViews } from './log/task-views';
import { RedactingEventStore } from './log/redacting-event-store';
import { SessionSecrets } from './log/session-secrets';
import { DEFAULT_CODER_TOOL_TURNS } from './loop/engine/plan-runner';

/** ModelBackend[]: RUNLEDGER_FALLBACK_MODELS, in order */
export const FALLBACK_MODELS = Symbol('FALLBACK_MODELS');
/** ModelBackend: the orchestrator of last resort (sys_util) */
export const SYS_UTIL_BACKEND = Symbol('SYS_UTIL_BACKEND');
/** ToolOutcomeHook[] */
export const TOOL_OUTCOME_HOOKS = Symbol('TOOL_OUTCOME_HOOKS');
/** LoopGuard[]: the run discipline's guard first, then RuntimeOptions.guards */
export const LOOP_GUARDS = Symbol('LOOP_GUARDS');
const RUNTIME_OPTIONS = Symbol('RUNTIME_OPTIONS');
/** EventStore as the runtime writes to it: every event redacted of the secrets provided in its session */
const RUNTIME_STORE = Symbol('RUNTIME_STORE');
const MODEL_OPTIONS = Symbol('MODEL_OPTIONS');

function checkedModels(o: ModelOptions): ModelOptions {
  const dup = duplicateLabel([o.model, ...(o.fallbackModels ?? [])]);
  if (dup !== null) throw new ConfigError(`model providers must have distinct labels; ${dup} appears twice`);
  return o;
}

const modelProviders: Provider[] = [
  { provide: ModelBackend, useFactory: (o: ModelOptions) => o.model, inject: [MODEL_OPTIONS] },
  {
    provide: FALLBACK_MODELS,
    useFactory: (o: ModelOptions) => o.fallbackModels ?? [],
    inject: [MODEL_OPTIONS],
  },
];

const maxRoundsOf = (o: RuntimeSettings) => o.maxRounds ?? 10;
const coderToolTurnsOf = (o: RuntimeSettings) => o.coderToolTurns ?? DEFAULT_CODER_TOOL_TURNS;
const modelTimeoutOf = (o: RuntimeSettings) => o.modelTimeoutMs ?? o.discipline?.modelTimeoutMs ?? 60_000;

/** What the loop's settings-shaped parts are built over. */
interface ShapingPorts {
  store: EventStore;
  tools: ToolRegistry;
  permissions: PermissionService;
  vault: SecretVault;
  hooks: ToolOutcomeHook[];
  models: { orchestrator: ModelBackend; fallbacks: ModelBackend[]; sysUtil: ModelBackend };
  memory: MemoryRecall;
  logger: RuntimeLogger;
  scheduler: ExecutionScheduler;
  children: ChildTasks;
  remote: RemoteAgents;
}

// The parts of the loop that run settings shape (RunSettings: budgets, prices, retries, guards, prompt
// budget, round cap); one builder each, for this process's settings and for a task's recorded ones.
const newGuards = (o: RuntimeOptions): LoopGuard[] => [
  // with run discipline its guard judges the todos with the accept checks
  new TodoGuard(!o.discipline),
  ...(o.discipline
    ? [new DisciplineGuard(o.discipline, () => (o.clock ?? WALL_CLOCK).now(), o.workspace ?? null)]
    : []),
  ...(o.guards ?? []),
];
const newGateway = (o: RuntimeOptions) => new ModelGateway(o.discipline?.prices, o.discipline ?? null);
const newRouter = (
  o: RuntimeOptions,
  models: ShapingPorts['models'],
  gateway: ModelGateway,
  tools: ToolRegistry,
) =>
  new AsyncRouter(
    models,
    gateway,
    modelTimeoutOf(o),
    o.discipline
      ? { retry: o.discipline.retry, completionMaxMisses: o.discipline.completionMaxMisses, rng: o.rng }
      : NO_RETRY_POLICY,
    // Native tool calls are checked by the registry that will run them, so a bad call gets its correction turn.
    (name, args) => {
      const v = tools.validateArgs(name, args);
      return v.ok ? null : v.error;
    },
  );
const newEngine = (
  o: RuntimeOptions,
  p: Omit<ShapingPorts, 'models' | 'memory'>,
  gateway: ModelGateway,
  coder: ModelBackend,
  coderFallbacks: ModelBackend[],
) =>
  new ExecutionEngine({
    store: p.store,
    tools: p.tools,
    permissions: p.permissions,
    vault: p.vault,
    hooks: p.hooks,
    gateway,
    coder,
    coderFallbacks,
    modelTimeoutMs: modelTimeoutOf(o),
    coderToolTurns: coderToolTurnsOf(o),
    scheduler: p.scheduler,
    discipline: o.discipline,
    rng: o.rng,
    redact: o.redact ?? redactSecrets,
    log: (message, err) => p.logger.error({ err }, message),
    delegation: {
      agents: agentCatalogOf(o),
      children: p.children,
      maxDepth: o.maxDelegationDepth ?? DEFAULT_MAX_DELEGATION_DEPTH,
      clock: o.clock,
      remote: { agents: p.remote, vault: p.vault },
    },
    clock: o.clock,
    recordedTimers: o.recordedTimers ?? null,
  });
const agentCatalogOf = (o: RuntimeOptions) => new AgentCatalog(o.agents ?? []);
const newContext = (o: RuntimeOptions, memory: MemoryRecall) =>
  new ContextBuilder(
    memory,
    o.sectionBudgets ?? DEFAULT_SECTION_BUDGETS,
    undefined,
    o.discipline?.prompt ?? null,
    agentCatalogOf(o).list(),
  );

/**
 * The orchestrator a fork asked for by name: sys_util, or the configured backend answering as that
 * model; null when this process cannot run it.
 */
function orchestratorNamed(models: ShapingPorts['models'], model: string): ModelBackend | null {
  return model === SYS_UTIL ? models.sysUtil : models.orchestrator.withOrchestratorModel(model);
}

const refuseModel = (models: ShapingPorts['models'], model: string): string | null =>
  orchestratorNamed(models, model)
    ? null
    : `model ${JSON.stringify(model)} cannot be run here: the configured model backend (${models.orchestrator.backend}) serves no other model; use ${JSON.stringify(SYS_UTIL)} or leave model out`;

/**
 * The loop's parts for a fork: under the settings its TASK_RECEIVED recorded (this process's when
 * none were), with the orchestrator it named, over this process's ports. The fork's coder steps stay
 * on the configured backend.
 */
function recordedShape(
  o: RuntimeOptions,
  p: ShapingPorts,
  settings: RunSettings | null,
  model: string | null,
): ShapedLoopParts {
  const shaped: RuntimeOptions = settings ? { ...o, ...runShapingOf(settings) } : o;
  const gateway = newGateway(shaped);
  const orchestrator = model === null ? p.models.orchestrator : orchestratorNamed(p.models, model);
  if (!orchestrator) throw new ConfigError(refuseModel(p.models, model!)!);
  return {
    guards: newGuards(shaped),
    router: newRouter(shaped, { ...p.models, orchestrator }, gateway, p.tools),
    engine: newEngine(shaped, p, gateway, p.models.orchestrator, p.models.fallbacks),
    context: newContext(shaped, p.memory),
    maxRounds: maxRoundsOf(shaped),
  };
}

/** The runtime's own parts, over the ports (store, tools, permissions, models, memory, logger) injected by token. */
function runtimeProviders(): Provider[] {
  return [
    {
      provide: TOOL_OUTCOME_HOOKS,
      useFactory: (o: RuntimeOptions): ToolOutcomeHook[] => [...(o.hooks ?? [])],
      inject: [RUNTIME_OPTIONS],
    },
    {
      provide: LOOP_GUARDS,
      useFactory: newGuards,
      inject: [RUNTIME_OPTIONS],
    },
    {
      provide: MemoryRecall,
      useFactory: (o: RuntimeOptions) => o.memory ?? new NoMemoryRecall(),
      inject: [RUNTIME_OPTIONS],
    },
    {
      provide: ModelGateway,
      useFactory: newGateway,
      inject: [RUNTIME_OPTIONS],
    },
    { provide: SecretVault, useFactory: () => new SecretVault() },
    { provide: ChildTasks, useFactory: () => new ChildTasks() },
    {
      provide: RemoteAgents,
      useFactory: (o: RuntimeOptions) => o.remoteAgents ?? new A2ARemoteAgents(),
      inject: [RUNTIME_OPTIONS],
    },
    {
      provide: TaskTree,
      useFactory: (store: EventStore, views: TaskViews) => new TaskTree(store, views),
      inject: [EventStore, TaskViews],
    },
    {
      provide: SessionSecrets,
      useFactory: (o: RuntimeOptions) => new SessionSecrets(o.secretKey),
      inject: [RUNTIME_OPTIONS],
    },
    {
      provide: TaskOwnership,
      useFactory: (o: RuntimeOptions, leases: LeaseStore | null, logger: RuntimeLogger) =>
        leases ? new TaskOwnership(leases, logger, o.leases) : null,
      inject: [RUNTIME_OPTIONS, LeaseStore, RuntimeLogger],
    },
    {
      provide: RUNTIME_STORE,
      useFactory: (store: EventStore, secrets: SessionSecrets) => new RedactingEventStore(store, secrets),
      inject: [EventStore, SessionSecrets],
    },
    {
      provide: AsyncRouter,
      useFactory: (
        o: RuntimeOptions,
        orchestrator: ModelBackend,
        fallbacks: ModelBackend[],
        sysUtil: ModelBackend,
        gateway: ModelGateway,
        tools: ToolRegistry,
      ) => newRouter(o, { orchestrator, fallbacks, sysUtil }, gateway, tools),
      inject: [RUNTIME_OPTIONS, ModelBackend, FALLBACK_MODELS, SYS_UTIL_BACKEND, ModelGateway, ToolRegistry],
    },
    {
      provide: ExecutionEngine,
      useFactory: (
        o: RuntimeOptions,
        store: EventStore,
        tools: ToolRegistry,
        permissions: PermissionService,
        vault: SecretVault,
        hooks: ToolOutcomeHook[],
        gateway: ModelGateway,
        coder: ModelBackend,
        coderFallbacks: ModelBackend[],
        logger: RuntimeLogger,
        scheduler: ExecutionScheduler,
        children: ChildTasks,
        remote: RemoteAgents,
      ) =>
        newEngine(
          o,
          { store, tools, permissions, vault, hooks, logger, scheduler, children, remote },
          gateway,
          coder,
          coderFallbacks,
        ),
      inject: [
        RUNTIME_OPTIONS,
        RUNTIME_STORE,
        ToolRegistry,
        PermissionService,
        SecretVault,
        TOOL_OUTCOME_HOOKS,
        ModelGateway,
        ModelBackend,
        FALLBACK_MODELS,
        RuntimeLogger,
        ExecutionScheduler,
        ChildTasks,
        RemoteAgents,
      ],
    },
    {
      provide: ContextBuilder,
      useFactory: newContext,
      inject: [RUNTIME_OPTIONS, MemoryRecall],
    },
    {
      provide: SubmissionPacing,
      useFactory: (o: RuntimeOptions, store: EventStore) =>
        new SubmissionPacing(
          o.backpressure ?? null,
          o.loopLoad ?? (o.backpressure ? new EventLoopMonitor(() => store.commitThreadUse()) : null),
        ),
      inject: [RUNTIME_OPTIONS, EventStore],
    },
    {
      provide: RuntimeLoop,
      useFactory: (
        o: RuntimeOptions,
        store: EventStore,
        tools: ToolRegistry,
        permissions: PermissionService,
        context: ContextBuilder,
        router: AsyncRouter,
        engine: ExecutionEngine,
        guards: LoopGuard[],
        vault: SecretVault,
        hooks: ToolOutcomeHook[],
        orchestrator: ModelBackend,
        fallbacks: ModelBackend[],
        sysUtil: ModelBackend,
        memory: MemoryRecall,
        logger: RuntimeLogger,
        scheduler: ExecutionScheduler,
        children: ChildTasks,
        pacing: SubmissionPacing,
        remote: RemoteAgents,
      ) => {
        const ports: ShapingPorts = {
          store,
          tools,
          permissions,
          vault,
          hooks,
          models: { orchestrator, fallbacks, sysUtil },
          memory,
          logger,
          scheduler,
          children,
          remote,
        };
        return new RuntimeLoop({
          store,
          tools,
          permissions,
          context,
          router,
          engine,
          guards,
          maxRounds: maxRoundsOf(o),
          clock: o.clock,
          recordedShape: (settings, model) => recordedShape(o, ports, settings, model),
          checkpoints: o.checkpoints ? (log) => new TaskCheckpoints(o.checkpoints!, logger, log) : null,
          pacing,
          evaluation: new AnswerEvaluation(orchestrator, o.discipline?.prices),
        });
      },
      inject: [
        RUNTIME_OPTIONS,
        RUNTIME_STORE,
        ToolRegistry,
        PermissionService,
        ContextBuilder,
        AsyncRouter,
        ExecutionEngine,
        LOOP_GUARDS,
        SecretVault,
        TOOL_OUTCOME_HOOKS,
        ModelBackend,
        FALLBACK_MODELS,
        SYS_UTIL_BACKEND,
        MemoryRecall,
        RuntimeLogger,
        ExecutionScheduler,
        ChildTasks,
        SubmissionPacing,
        RemoteAgents,
      ],
    },
    {
      provide: RunQueue,
      useFactory: (
        o: RuntimeOptions,
        loop: RuntimeLoop,
        logger: RuntimeLogger,
        pacing: SubmissionPacing,
        ownership: TaskOwnership | null,
      ) =>
        new RunQueue({
          loop,
          logger,
          concurrency: o.concurrency ?? 4,
          pacing,
          backpressure: o.backpressure ?? null,
          ownership,
        }),
      inject: [RUNTIME_OPTIONS, RuntimeLoop, RuntimeLogger, SubmissionPacing, TaskOwnership],
    },
    {
      provide: Admission,
      useFactory: (o: RuntimeOptions, runs: RunQueue, pacing: SubmissionPacing) =>
        new Admission(runs, pacing, o.backpressure ?? null, o.concurrency ?? 4),
      inject: [RUNTIME_OPTIONS, RunQueue, SubmissionPacing],
    },
    {
      provide: TaskAnswers,
      useFactory: (store: EventStore, runs: RunQueue, ownership: TaskOwnership | null) =>
        new TaskAnswers(store, runs, ownership),
      inject: [RUNTIME_STORE, RunQueue, TaskOwnership],
    },
    {
      provide: SessionQueue,
      useFactory: (
        o: RuntimeOptions,
        store: EventStore,
        runs: RunQueue,
        answers: TaskAnswers,
        logger: RuntimeLogger,
        views: TaskViews,
        ownership: TaskOwnership | null,
      ) =>
        new SessionQueue({
          store,
          runs,
          answers,
          logger,
          progress: (taskId) => loadProgress(store, o.checkpoints?.store ?? null, taskId),
          sessionTasks: (sessionId, limit) => views.sessionTasks(sessionId, limit),
          ownership,
        }),
      inject: [
        RUNTIME_OPTIONS,
        RUNTIME_STORE,
        RunQueue,
        TaskAnswers,
        RuntimeLogger,
        TaskViews,
        TaskOwnership,
      ],
    },
    {
      provide: Recovery,
      useFactory: (
        o: RuntimeOptions,
        store: EventStore,
        runs: RunQueue,
        answers: TaskAnswers,
        ownership: TaskOwnership | null,
        logger: RuntimeLogger,
        sessions: SessionQueue,
      ) =>
        new Recovery({
          store,
          runs,
          answers,
          ownership,
          logger,
          sessions,
          progress: (taskId) => loadProgress(store, o.checkpoints?.store ?? null, taskId),
          // a run on another clock (a replay's, the recording's) fires only the firings it is handed
          wallClockTimers: o.clock === undefined,
        }),
      inject: [
        RUNTIME_OPTIONS,
        RUNTIME_STORE,
        RunQueue,
        TaskAnswers,
        TaskOwnership,
        RuntimeLogger,
        SessionQueue,
      ],
    },
    {
      provide: RuntimeController,
      useFactory: (
        o: RuntimeOptions,
        store: EventStore,
        loop: RuntimeLoop,
        vault: SecretVault,
        logger: RuntimeLogger,
        tools: ToolRegistry,
        secrets: SessionSecrets,
        rawStore: EventStore,
        scheduler: ExecutionScheduler,
        orchestrator: ModelBackend,
        fallbacks: ModelBackend[],
        sysUtil: ModelBackend,
        views: TaskViews,
        ownership: TaskOwnership | null,
        children: ChildTasks,
        runs: RunQueue,
        admission: Admission,
        answers: TaskAnswers,
        recovery: Recovery,
        remote: RemoteAgents,
        sessions: SessionQueue,
      ) => {
        const controller = new RuntimeController({
          ownership,
          remoteChildren: { agents: agentCatalogOf(o), remote },
          store,
          loop,
          vault,
          secrets,
          runs,
          admission,
          answers,
          recovery,
          sessions,
          logger,
          checkpoints: o.checkpoints?.store ?? null,
          runSettings: (budgets) =>
            recordRunSettings(
              {
                maxRounds: maxRoundsOf(o),
                coderToolTurns: coderToolTurnsOf(o),
                discipline: o.discipline,
                todos: o.todos,
                roundPolicy: o.roundPolicy,
                answerEvaluator: o.answerEvaluator,
                toolBudgets: toolBudgetsOf(tools.list()),
              },
              budgets,
              orchestrator.speaksToolCalls('orchestrator') ? 'tools' : 'json',
            ),
          replay: (taskId, request) =>
            replayTask(
              {
                ...o,
                stepConcurrency: scheduler.options.stepConcurrency,
                store: rawStore,
                tools,
                logger,
              },
              taskId,
              request,
            ),
          sessionTasks: (sessionId, limit) => views.sessionTasks(sessionId, limit),
          refuseModel: (model) => refuseModel({ orchestrator, fallbacks, sysUtil }, model),
        });
        children.attach(o.childTasks ?? controller);
        return controller;
      },
      inject: [
        RUNTIME_OPTIONS,
        RUNTIME_STORE,
        RuntimeLoop,
        SecretVault,
        RuntimeLogger,
        ToolRegistry,
        SessionSecrets,
        EventStore,
        ExecutionScheduler,
        ModelBackend,
        FALLBACK_MODELS,
        SYS_UTIL_BACKEND,
        TaskViews,
        TaskOwnership,
        ChildTasks,
        RunQueue,
        Admission,
        TaskAnswers,
        Recovery,
        RemoteAgents,
        SessionQueue,
      ],
    },
  ];
}

const exported = [RuntimeController, TaskViews, TaskTree, RuntimeLoop, SecretVault];

/** ModelBackend (the configured model, serving every role) and FALLBACK_MODELS. */
@Module({})
export class ModelModule {
  static forRootAsync(options: ModuleAsyncOptions<ModelOptions>): DynamicModule {
    return forRootAsyncModule(ModelModule, options, {
      provide: MODEL_OPTIONS,
      build: checkedModels,
      providers: modelProviders,
      exports: [ModelBackend, FALLBACK_MODELS],
    });
  }
}

/**
 * RuntimeController (the one facade), RuntimeLoop, AsyncRouter, ContextBuilder,
 * ExecutionEngine and TaskViews, over the ports the other modules provide:
 * EventStore, TaskStateStore and STORAGE_DB (StorageModule), ToolRegistry
 * (ToolsModule), PermissionService (PermissionsModule), ModelBackend
 * (ModelModule), and a RuntimeLogger from the app.
 */
@Module({})
export class RuntimeModule {
  static forRootAsync(options: ModuleAsyncOptions<RuntimeOptions>): DynamicModule {
    return forRootAsyncModule(RuntimeModule, options, {
      provide: RUNTIME_OPTIONS,
      providers: [
        { provide: SYS_UTIL_BACKEND, useFactory: () => new SysUtilBackend() },
        {
          provide: TaskViews,
          useFactory: (states: TaskStateStore) => new ProjectionTaskViews(states),
          inject: [TaskStateStore],
        },
        ...runtimeProviders(),
      ],
      exports: exported,
    });
  }

  /**
   * The same runtime over ports given as values, in a module of its own: a
   * replay's runtime (the recorded task's answers standing in for models and
   * tools), and tests. Tasks are read from the log (LogTaskViews).
   */
  static forParts(parts: RuntimeParts): DynamicModule {
    return {
      module: RuntimeModule,
      providers: [
        { provide: RUNTIME_OPTIONS, useValue: parts },
        { provide: MODEL_OPTIONS, useValue: checkedModels(parts) },
        ...modelProviders,
        { provide: SYS_UTIL_BACKEND, useValue: parts.sysUtil ?? new SysUtilBackend() },
        { provide: EventStore, useValue: parts.store },
        { provide: LeaseStore, useValue: parts.leaseStore ?? null },
        { provide: ToolRegistry, useValue: parts.tools },
        { provide: PermissionService, useValue: parts.permissions },
        { provide: RuntimeLogger, useValue: parts.logger },
        {
          provide: ExecutionScheduler,
          useValue: new ExecutionScheduler({ stepConcurrency: parts.stepConcurrency ?? 4 }),
        },
        {
          provide: TaskViews,
          useFactory: (store: EventStore) => new LogTaskViews(store, parts.checkpoints?.store ?? null),
          inject: [EventStore],
        },
        ...runtimeProviders(),
      ],
      exports: exported,
    };
  }
}

/** Re-run a recorded task offline as a new task, in a runtime of this module over the recording (see runReplay). */
export function replayTask(
  options: ReplayOptions,
  sourceTaskId: string,
  request: ReplayRequest = {},
): Promise<ReplayResult> {
  return runReplay((parts) => RuntimeModule.forParts(parts), options, sourceTaskId, request);
}
