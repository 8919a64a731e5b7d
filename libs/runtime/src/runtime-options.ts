import { RecordedTimers } from './loop/engine/timers';
import { AgentProfile, AnswerEvaluatorSettings } from '@runledger/contracts';
import { EventStore } from '@runledger/event-store';
import { PermissionService } from '@runledger/permissions';
import { LeaseStore } from '@runledger/state-store';
import { ToolRegistry } from '@runledger/tools';
import { BackpressureLimits } from './control/backpressure';
import { LoopLoadSource } from './loop/pacing';
import { OwnershipSettings } from './control/task-ownership';
import { ChildTaskHost } from './delegation/child-tasks';
import { RemoteAgents } from './delegation/remote-agents';
import { DisciplineSettings } from './discipline/settings';
import { WorkspaceView } from './discipline/workspace-view';
import { CheckpointSettings } from './log/checkpoints';
import { SectionBudgets } from './loop/context-builder';
import { EngineDeps } from './loop/execution-engine';
import { ModelBackend } from './model/model-backend';
import { MemoryRecall, RunClock, ToolOutcomeHook } from './ports';
import { LoopGuard } from './loop/guards/loop-guard';
import { RuntimeLogger } from './runtime-logger';

/** How the runtime runs; every field has a default. */
export interface RuntimeSettings {
  maxRounds?: number;
  /** tasks run at once in this process */
  concurrency?: number;
  /** when submissions are refused and queued tasks held back; none when absent */
  backpressure?: BackpressureLimits;
  /** what backpressure reads the event loop's load from; a monitor of this process when absent */
  loopLoad?: LoopLoadSource;
  /** plan steps of one task run at once, where no SchedulerModule provides the ExecutionScheduler (forParts) */
  stepConcurrency?: number;
  modelTimeoutMs?: number;
  /** how many tool-call replies a coder step may make before it must answer in text (tools protocol) */
  coderToolTurns?: number;
  /** todos offered from a task's first round, a request for a change reminded to create its own (RUNLEDGER_TODOS; off when absent) */
  todos?: boolean;
  /** the runtime decides each round's tool surface and refuses what it did not offer (RUNLEDGER_ROUND_POLICY; off when absent) */
  roundPolicy?: boolean;
  /** the orchestrator's own tasks have their final answer evaluated (RUNLEDGER_EVALUATOR; off when absent) */
  answerEvaluator?: AnswerEvaluatorSettings;
  sectionBudgets?: SectionBudgets;
  /** run discipline (budgets, retries, completion protocol, repeat detector, accept gate); off when absent */
  discipline?: DisciplineSettings;
  /** seeds retry jitter (tests, replays) */
  rng?: () => number;
  /** what budgets and the end-to-end deadline are timed by; the wall clock when absent (a replay: the recording's) */
  clock?: RunClock;
  /** a replay's timers: each due when the recording set it (absent: computed by the clock) */
  recordedTimers?: RecordedTimers;
  redact?: EngineDeps['redact'];
  /** what the accept gate looks at when the log does not settle a file check (the allowed root) */
  workspace?: WorkspaceView | null;
  /** key of the secrets' fingerprints in the log (beside the database); random: recognised by this process only */
  secretKey?: Buffer;
  /** lease renewal and expiry of the tasks this process runs (defaults: renew every 5 s, expire after 20 s) */
  leases?: Partial<OwnershipSettings>;
  /** the agents a task may delegate to, beside the built-in coder (RUNLEDGER_AGENTS) */
  agents?: AgentProfile[];
  /** how many delegations down from a root a task may be (default 3) */
  maxDelegationDepth?: number;
}

/** What RuntimeModule.forRootAsync's factory returns: settings, and what other libs plug into the loop. */
export interface RuntimeOptions extends RuntimeSettings {
  /** after every tool outcome (critic, memory write policy) */
  hooks?: ToolOutcomeHook[];
  /** before each round and at the end, after the run discipline's own guard */
  guards?: LoopGuard[];
  /** what the ContextBuilder recalls; nothing when absent */
  memory?: MemoryRecall | null;
  /** checkpoints written by the loop and read by resume and task views; none when absent */
  checkpoints?: CheckpointSettings | null;
  /** where delegations' child tasks run: this runtime's controller when absent (a replay answers from its recording) */
  childTasks?: ChildTaskHost;
  /** where remote agents (A2A) are reached: over the network when absent (a replay answers from its recording) */
  remoteAgents?: RemoteAgents;
}

/** ModelModule's options: the backend serving every role, and the providers that stand in for it. */
export interface ModelOptions {
  /** sys_util when no model is configured */
  model: ModelBackend;
  /**
   * Asked in order after `model`'s retries ran out on provider_error /
   * rate_limited / timeout (orchestrator, coder steps, compaction); for the
   * orchestrator sys_util comes after the last. Labels must be unique.
   */
  fallbackModels?: ModelBackend[];
}

/** Every port and setting the runtime's providers are built from, given as values (replays, tests). */
export interface RuntimeParts extends RuntimeOptions, ModelOptions {
  store: EventStore;
  tools: ToolRegistry;
  permissions: PermissionService;
  logger: RuntimeLogger;
  /** the fallback orchestrator; sys_util unless replaying */
  sysUtil?: ModelBackend;
  /** task ownership, when other processes may write `store` too; without it every task runs here, unfenced */
  leaseStore?: LeaseStore | null;
}
