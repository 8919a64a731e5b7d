import { EventStore } from '@runledger/event-store';
import { PermissionPolicy } from '@runledger/permissions';
import { ToolRegistry, redactSecrets } from '@runledger/tools';
import { AsyncRouter, NO_RETRY_POLICY } from './async-router';
import { DisciplineGuard } from './discipline/discipline-guard';
import { DisciplineSettings } from './discipline/settings';
import { WorkspaceView } from './discipline/workspace-view';
import { ContextBuilder, DEFAULT_SECTION_BUDGETS, SectionBudgets } from './context-builder';
import { EngineDeps, ExecutionEngine } from './execution-engine';
import { ModelGateway } from './model-gateway';
import { ModelBackend } from './model/model-backend';
import { SysUtilBackend } from './model/sys-util';
import { duplicateLabel } from './model/providers';
import { ConfigError } from '@runledger/contracts';
import { LoopGuard, MemoryRecall, NoMemoryRecall, SecretVault, ToolOutcomeHook } from './ports';
import { RuntimeLoop } from './runtime-loop';
import { RuntimeService } from './runtime-service';
import { RedactingEventStore } from './redacting-event-store';
import { SessionSecrets } from './session-secrets';

export interface RuntimeOptions {
  store: EventStore;
  tools: ToolRegistry;
  permissions: PermissionPolicy;
  /** serves every role; sys_util when no model is configured */
  model: ModelBackend;
  /**
   * Providers that stand in for `model`, in order, after its retries ran out
   * on provider_error / rate_limited / timeout (orchestrator, coder steps,
   * compaction); for the orchestrator sys_util comes after the last. Labels
   * (ModelBackend.label) must be unique.
   */
  fallbackModels?: ModelBackend[];
  /** the fallback orchestrator; sys_util unless replaying */
  sysUtil?: ModelBackend;
  memory?: MemoryRecall;
  hooks?: ToolOutcomeHook[];
  guards?: LoopGuard[];
  redact?: EngineDeps['redact'];
  maxRounds?: number;
  concurrency?: number;
  stepConcurrency?: number;
  modelTimeoutMs?: number;
  sectionBudgets?: SectionBudgets;
  /** run discipline (budgets, retries, completion protocol, repeat detector, accept gate); off when absent */
  discipline?: DisciplineSettings;
  /** what the accept gate looks at when the log does not settle a file check (the allowed root) */
  workspace?: WorkspaceView;
  /** seeds retry jitter (tests) */
  rng?: () => number;
  /** key of the secrets' fingerprints in the log (beside the database); random: recognised by this process only */
  secretKey?: Buffer;
  log?: (message: string, err?: unknown) => void;
}

export interface Runtime {
  service: RuntimeService;
  loop: RuntimeLoop;
  /** hooks and guards may be added after construction (memory, critic, run discipline) */
  hooks: ToolOutcomeHook[];
  guards: LoopGuard[];
}

const stderrLog = (message: string, err?: unknown) =>
  process.stderr.write(
    `runledger: ${message}${err ? `: ${err instanceof Error ? err.message : String(err)}` : ''}\n`,
  );

/** Wires router, context builder, engine, loop and service around one store, registry, policy and model. */
export function createRuntime(o: RuntimeOptions): Runtime {
  const log = o.log ?? stderrLog;
  const hooks = [...(o.hooks ?? [])];
  const d = o.discipline;
  const guards = [
    ...(d ? [new DisciplineGuard(d, undefined, o.workspace ?? null)] : []),
    ...(o.guards ?? []),
  ];
  const gateway = new ModelGateway(d?.prices, d ?? null);
  const vault = new SecretVault();
  const secrets = new SessionSecrets(o.secretKey);
  // every event a task appends is redacted of the secrets provided in its session
  const store = new RedactingEventStore(o.store, secrets);
  const modelTimeoutMs = o.modelTimeoutMs ?? d?.modelTimeoutMs ?? 60_000;
  const policy = d
    ? { retry: d.retry, completionMaxMisses: d.completionMaxMisses, rng: o.rng }
    : NO_RETRY_POLICY;
  const fallbacks = o.fallbackModels ?? [];
  const dup = duplicateLabel([o.model, ...fallbacks]);
  if (dup !== null) throw new ConfigError(`model providers must have distinct labels; ${dup} appears twice`);
  const router = new AsyncRouter(
    { orchestrator: o.model, fallbacks, sysUtil: o.sysUtil ?? new SysUtilBackend() },
    gateway,
    modelTimeoutMs,
    policy,
  );
  const engine = new ExecutionEngine({
    store,
    tools: o.tools,
    permissions: o.permissions,
    vault,
    hooks,
    gateway,
    coder: o.model,
    coderFallbacks: fallbacks,
    modelTimeoutMs,
    stepConcurrency: o.stepConcurrency ?? 4,
    discipline: d,
    rng: o.rng,
    redact: o.redact ?? redactSecrets,
    log,
  });
  const loop = new RuntimeLoop({
    store,
    tools: o.tools,
    permissions: o.permissions,
    context: new ContextBuilder(
      o.memory ?? new NoMemoryRecall(),
      o.sectionBudgets ?? DEFAULT_SECTION_BUDGETS,
      undefined,
      d?.prompt ?? null,
    ),
    router,
    engine,
    guards,
    maxRounds: o.maxRounds ?? 10,
  });
  const service = new RuntimeService({ store, loop, vault, secrets, concurrency: o.concurrency ?? 4, log });
  return { service, loop, hooks, guards };
}
