import { EventStore } from '@runledger/event-store';
import { ExecutionDirective, ToolResult } from '@runledger/contracts';
import { DelegationDeps, DelegationRunner } from '../delegation/delegation-runner';
import { PermissionService } from '@runledger/permissions';
import { ExecutionScheduler } from '@runledger/scheduler';
import { ToolRegistry } from '@runledger/tools';
import { ModelGateway } from './model-gateway';
import { ModelBackend } from '../model/model-backend';
import { RunClock, SecretVault, Stop, ToolOutcomeHook } from '../ports';
import { RecordedTimers } from './engine/timers';
import { callIdFor } from '../log/progress';
import { TaskWriter } from '../log/task-writer';
import { failDirectiveStop } from '../discipline/stop-reasons';
import { DisciplineSettings } from '../discipline/settings';
import { AllowAlwaysGrants } from './engine/allow-always-grants';
import { ExecOutcome } from './engine/call-types';
import { PlanRunner, hardStopEnd } from './engine/plan-runner';
import { ToolCallRunner } from './engine/tool-call-runner';

export type { ExecOutcome } from './engine/call-types';

export interface EngineDeps {
  store: EventStore;
  tools: ToolRegistry;
  permissions: PermissionService;
  vault: SecretVault;
  hooks: readonly ToolOutcomeHook[];
  gateway: ModelGateway;
  /** the backend that serves the coder role */
  coder: ModelBackend;
  /** providers that stand in for `coder` after its retries ran out (those that serve the coder role) */
  coderFallbacks?: readonly ModelBackend[];
  modelTimeoutMs: number;
  /** how many tool-call replies a coder step may make before it must answer in text */
  coderToolTurns?: number;
  scheduler: ExecutionScheduler;
  redact: (value: ToolResult, secrets: readonly string[]) => ToolResult;
  /** run discipline: circuit breaker, adaptive timeouts, retries of idempotent tools; off when absent */
  discipline?: DisciplineSettings;
  rng?: () => number;
  log: (message: string, err?: unknown) => void;
  /** agents, the host of child tasks and the depth limit; a task cannot delegate when absent */
  delegation?: DelegationDeps;
  /** what a timer's due time is computed from; the wall clock when absent */
  clock?: RunClock;
  /** a replay's timers: due when the recording says */
  recordedTimers?: RecordedTimers | null;
}

/** The one step a delegate directive runs as: a plan of one agent step. */
export const DELEGATE_STEP_ID = 'delegate';
/** The one step a wait directive runs as: a plan of one wait step. */
export const WAIT_STEP_ID = 'wait';
/** The one step a wait_for_signal directive runs as. */
export const WAIT_FOR_SIGNAL_STEP_ID = 'wait_for_signal';

/**
 * Runs a decided directive: plan, tool, respond, fail. Plans go to the
 * PlanRunner, tool calls to the ToolCallRunner (gates, then intent event, run,
 * outcome); every side effect is an intent event first, then an outcome.
 */
export class ExecutionEngine {
  private readonly toolCalls: ToolCallRunner;
  private readonly plans: PlanRunner;

  constructor(deps: EngineDeps) {
    this.toolCalls = new ToolCallRunner({ ...deps, grants: new AllowAlwaysGrants(deps.store) });
    this.plans = new PlanRunner({
      ...deps,
      toolCalls: this.toolCalls,
      delegation: deps.delegation ? new DelegationRunner(deps.delegation) : null,
    });
  }

  async execute(
    writer: TaskWriter,
    directive: ExecutionDirective,
    round: number,
    signal: AbortSignal,
  ): Promise<ExecOutcome> {
    switch (directive.type) {
      case 'respond':
        return {
          kind: 'end',
          stop: { stop_reason: 'completed', detail: 'the orchestrator responded' },
          result: directive.content,
        };
      case 'fail':
        return {
          kind: 'end',
          stop: { stop_reason: this.failReason(writer), detail: directive.reason },
          result: null,
        };
      case 'tool': {
        const out = await this.toolCalls.run(
          writer,
          {
            call_id: callIdFor(round, null),
            tool: directive.tool,
            args: directive.args,
            step_id: null,
            requiresConfirmation: false,
          },
          signal,
        );
        if (out.kind === 'suspend') return out;
        if (out.kind === 'hard_stop') return hardStopEnd(out);
        return { kind: 'continue' };
      }
      case 'plan':
        return this.plans.run(writer, directive.steps, round, signal, directive.todos);
      case 'delegate': {
        // A delegation alone is a plan of one agent step: the same events, resume and context as in any plan.
        const { type: _delegate, ...args } = directive;
        const step = {
          id: DELEGATE_STEP_ID,
          kind: 'agent' as const,
          tool: null,
          args,
          description: `delegate to ${args.agent}`,
          requires_confirmation: false,
          depends_on: [],
        };
        return this.plans.run(writer, [step], round, signal);
      }
      case 'wait': {
        // A wait alone is a plan of one wait step, as a delegation is of one agent step.
        const args =
          directive.until !== undefined ? { until: directive.until } : { duration_ms: directive.duration_ms };
        const step = {
          id: WAIT_STEP_ID,
          kind: 'wait' as const,
          tool: null,
          args,
          description:
            directive.until !== undefined
              ? `wait until ${directive.until}`
              : `wait ${directive.duration_ms} ms`,
          requires_confirmation: false,
          depends_on: [],
        };
        return this.plans.run(writer, [step], round, signal);
      }
      case 'wait_for_signal': {
        const { type: _wait, ...args } = directive;
        const step = {
          id: WAIT_FOR_SIGNAL_STEP_ID,
          kind: 'wait_for_signal' as const,
          tool: null,
          args,
          description:
            args.timeout_ms === undefined
              ? `wait for signal ${args.name}`
              : `wait for signal ${args.name}, at most ${args.timeout_ms} ms`,
          requires_confirmation: false,
          depends_on: [],
        };
        return this.plans.run(writer, [step], round, signal);
      }
    }
  }

  /** The orchestrator gave up: a denied permission explains it best, else a tool failure. */
  private failReason(writer: TaskWriter): Stop['stop_reason'] {
    return failDirectiveStop(writer.progress, writer.fold.lastDecision);
  }
}
