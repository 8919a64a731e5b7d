import { EventStore } from '@runledger/event-store';
import {
  ExecutionDirective,
  NewEvent,
  PlanStep,
  ToolManifest,
  ToolResult,
  hashArgs,
  newId,
} from '@runledger/contracts';
import { PermissionService } from '@runledger/permissions';
import {
  StepStatus,
  UnknownStepReferenceError,
  blockedSteps,
  findCycle,
  readySteps,
  substituteOutputs,
} from '@runledger/scheduler';
import { RegisteredTool, ToolRegistry } from '@runledger/tools';
import { ModelGateway } from './model-gateway';
import { ModelBackend, sleep } from './model/model-backend';
import { SecretVault, Stop, ToolOutcomeHook, isShutdown } from './ports';
import { PlanProgress, callIdFor, planIdFor } from './progress';
import { TaskWriter } from './task-writer';
import {
  adaptiveToolTimeout,
  decideFailure,
  hasExitCode,
  isCircuitOpen,
  toolGuardFromEvents,
} from './discipline/failure-policy';
import { guardEvent } from './discipline/retry-runner';
import { admit, resolveBudgets } from './discipline/budgets';
import { describeStop } from './discipline/stop-reasons';
import { DisciplineSettings, NO_RETRIES } from './discipline/settings';
import { callThroughChain } from './provider-chain';

export type ExecOutcome =
  { kind: 'continue' } | { kind: 'suspend' } | { kind: 'end'; stop: Stop; result: string | null };

/** hard_stop ends the task: permission_denied unless it says otherwise (a budget that ran out) */
type HardStop = { kind: 'hard_stop'; reason: string; stop_reason?: Stop['stop_reason'] };
type CallOutcome =
  { kind: 'done'; ok: boolean; output: unknown; error: string | null } | { kind: 'suspend' } | HardStop;
type StepOutcome =
  { kind: 'completed'; output: unknown } | { kind: 'failed'; error: string } | { kind: 'suspend' } | HardStop;

interface CallSpec {
  call_id: string;
  tool: string;
  args: Record<string, unknown>;
  step_id: string | null;
  requiresConfirmation: boolean;
}

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
  stepConcurrency: number;
  redact: (value: ToolResult, secrets: readonly string[]) => ToolResult;
  /** run discipline: circuit breaker, adaptive timeouts, retries of idempotent tools; off when absent */
  discipline?: DisciplineSettings;
  rng?: () => number;
  log: (message: string, err?: unknown) => void;
}

const CODER_SYSTEM = 'You are the coder. Do exactly what is asked and reply with the result only.';

/** Runs a decided directive: plan, tool, respond, fail. Every side effect is an intent event first, then an outcome. */
export class ExecutionEngine {
  constructor(private readonly deps: EngineDeps) {}

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
        const out = await this.toolCall(
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
        if (out.kind === 'hard_stop')
          return {
            kind: 'end',
            stop: { stop_reason: out.stop_reason ?? 'permission_denied', detail: out.reason },
            result: null,
          };
        return { kind: 'continue' };
      }
      case 'plan':
        return this.runPlan(writer, directive.steps, round, signal);
    }
  }

  /** The orchestrator gave up: a denied permission explains it best, else a tool failure. */
  private failReason(writer: TaskWriter): Stop['stop_reason'] {
    const kinds = [...writer.progress.calls.values()].map((c) => c.error_kind);
    return kinds.includes('permission_denied') ? 'permission_denied' : 'tool_error';
  }

  private async runPlan(
    writer: TaskWriter,
    steps: PlanStep[],
    round: number,
    signal: AbortSignal,
  ): Promise<ExecOutcome> {
    const plan_id = planIdFor(round);
    if (!writer.progress.plans.has(plan_id)) {
      const cycle = findCycle(steps);
      if (cycle) {
        await writer.append([
          {
            type: 'PLAN_FAILED',
            payload: {
              plan_id,
              reason: `dependency cycle: ${cycle.join(' -> ')}`,
              failed_step: null,
              cycle,
              step_results: [],
            },
          },
        ]);
        return { kind: 'continue' };
      }
      await writer.append([{ type: 'PLAN_STARTED', payload: { plan_id, steps } }]);
    }
    const plan = writer.progress.plans.get(plan_id)!;
    // A step that was running when the process stopped runs again; its tool call decides what that means.
    const status = new Map<string, StepStatus>(
      [...plan.status].map(([id, s]) => [id, s === 'running' ? 'pending' : s]),
    );
    const inFlight = new Map<string, Promise<{ id: string; out: StepOutcome }>>();
    let failed: { id: string; error: string } | null = null;
    let suspended = false;
    let hardStop: HardStop | null = null;
    for (;;) {
      if (!failed && !suspended && !hardStop && !signal.aborted) {
        for (const step of readySteps(plan.steps, status, this.deps.stepConcurrency)) {
          status.set(step.id, 'running');
          inFlight.set(
            step.id,
            this.runStep(writer, plan, step, round, signal).then((out) => ({ id: step.id, out })),
          );
        }
      }
      if (inFlight.size === 0) break;
      const { id, out } = await Promise.race(inFlight.values());
      inFlight.delete(id);
      if (out.kind === 'completed') status.set(id, 'completed');
      else if (out.kind === 'failed') {
        status.set(id, 'failed');
        failed ??= { id, error: out.error };
      } else if (out.kind === 'suspend') {
        status.set(id, 'pending');
        suspended = true;
      } else {
        status.set(id, 'failed');
        hardStop = out;
      }
    }
    if (hardStop)
      return {
        kind: 'end',
        stop: { stop_reason: hardStop.stop_reason ?? 'permission_denied', detail: hardStop.reason },
        result: null,
      };
    if (suspended || signal.aborted) return { kind: 'suspend' };
    if (failed) {
      const skipped = [
        ...blockedSteps(plan.steps, status),
        ...plan.steps.filter(
          (s) => status.get(s.id) === 'pending' && !blockedSteps(plan.steps, status).includes(s),
        ),
      ];
      await writer.append(
        skipped.map((s) => ({
          type: 'STEP_FAILED' as const,
          payload: { plan_id, step_id: s.id, error: `skipped: step ${failed!.id} failed`, skipped: true },
        })),
      );
      await writer.append([
        {
          type: 'PLAN_FAILED',
          payload: {
            plan_id,
            reason: `step ${failed.id} failed: ${failed.error}`,
            failed_step: failed.id,
            cycle: null,
            step_results: this.stepResults(writer, plan_id),
          },
        },
      ]);
      return { kind: 'continue' };
    }
    await writer.append([
      { type: 'PLAN_COMPLETED', payload: { plan_id, step_results: this.stepResults(writer, plan_id) } },
    ]);
    const answer = [...plan.steps].reverse().find((s) => s.kind === 'respond');
    if (answer) {
      const output = writer.progress.plans.get(plan_id)!.outputs.get(answer.id);
      return {
        kind: 'end',
        stop: { stop_reason: 'completed', detail: `plan step ${answer.id} responded` },
        result: typeof output === 'string' ? output : JSON.stringify(output),
      };
    }
    return { kind: 'continue' };
  }

  private stepResults(writer: TaskWriter, planId: string) {
    const plan = writer.progress.plans.get(planId)!;
    return plan.steps.map((s) => {
      const st = plan.status.get(s.id) ?? 'pending';
      return {
        step_id: s.id,
        status: st === 'running' ? ('pending' as const) : st,
        output: plan.outputs.get(s.id),
        error: plan.errors.get(s.id) ?? null,
      };
    });
  }

  private async runStep(
    writer: TaskWriter,
    plan: PlanProgress,
    step: PlanStep,
    round: number,
    signal: AbortSignal,
  ): Promise<StepOutcome> {
    const plan_id = plan.plan_id;
    // A step that waited for a person, or ran when the process stopped, continues: it started once.
    if (writer.progress.plans.get(plan_id)!.status.get(step.id) !== 'running') {
      await writer.append([
        { type: 'STEP_STARTED', payload: { plan_id, step_id: step.id, kind: step.kind, attempt: 1 } },
      ]);
    }
    let out: StepOutcome;
    try {
      out = await this.stepWork(writer, step, round, signal, writer.progress.plans.get(plan_id)!.outputs);
    } catch (err) {
      if (!(err instanceof UnknownStepReferenceError)) throw err;
      out = { kind: 'failed', error: err.message };
    }
    if (out.kind === 'completed')
      await writer.append([
        { type: 'STEP_COMPLETED', payload: { plan_id, step_id: step.id, output: out.output ?? null } },
      ]);
    if (out.kind === 'failed')
      await writer.append([
        { type: 'STEP_FAILED', payload: { plan_id, step_id: step.id, error: out.error, skipped: false } },
      ]);
    return out;
  }

  private async stepWork(
    writer: TaskWriter,
    step: PlanStep,
    round: number,
    signal: AbortSignal,
    outputs: ReadonlyMap<string, unknown>,
  ): Promise<StepOutcome> {
    const args = substituteOutputs(step.args, outputs);
    const call = (tool: string, callArgs: Record<string, unknown>) =>
      this.toolCall(
        writer,
        {
          call_id: callIdFor(round, step.id),
          tool,
          args: callArgs,
          step_id: step.id,
          requiresConfirmation: step.requires_confirmation,
        },
        signal,
      ).then((r): StepOutcome =>
        r.kind === 'done'
          ? r.ok
            ? { kind: 'completed', output: r.output }
            : { kind: 'failed', error: r.error ?? 'tool failed' }
          : r,
      );
    switch (step.kind) {
      case 'tool':
        return call(step.tool!, args);
      case 'memory': {
        const insert = ['insert', 'remember'].includes(String(args.op ?? 'search'));
        const text = String(args.text ?? args.query ?? step.description);
        return call(insert ? 'memory_insert' : 'memory_search', insert ? { text } : { query: text });
      }
      case 'respond':
        return { kind: 'completed', output: args.content ?? substituteOutputs(step.description, outputs) };
      case 'coder': {
        if (!this.deps.coder.modelFor('coder')) return { kind: 'failed', error: 'no coder model configured' };
        const prompt = String(args.prompt ?? step.description);
        const chain = [
          this.deps.coder,
          ...(this.deps.coderFallbacks ?? []).filter((b) => b.modelFor('coder') !== null),
        ];
        try {
          // Retries, then the next provider, as for the orchestrator; at the end of the chain the step fails.
          const out = await callThroughChain({
            gateway: this.deps.gateway,
            writer,
            chain,
            role: 'coder',
            round,
            request: {
              messages: [
                { role: 'system', content: CODER_SYSTEM },
                { role: 'user', content: prompt },
              ],
              timeout_ms: this.deps.modelTimeoutMs,
              signal,
            },
            retry: this.deps.discipline?.retry ?? NO_RETRIES,
            rng: this.deps.rng,
          });
          if (out.ok) return { kind: 'completed', output: out.res.content };
          return { kind: 'failed', error: `coder: ${(out.error as Error).message}` };
        } catch (err) {
          return { kind: 'failed', error: `coder: ${(err as Error).message}` };
        }
      }
    }
  }

  /**
   * One tool call, resumable: a recorded outcome is returned as is; an intent
   * without outcome is re-run only for an idempotent tool; then permission,
   * secrets, TOOL_CALLED, run, redacted outcome, outcome hooks.
   */
  private async toolCall(writer: TaskWriter, spec: CallSpec, signal: AbortSignal): Promise<CallOutcome> {
    const p = writer.progress;
    const prior = p.calls.get(spec.call_id);
    if (prior?.outcome)
      return {
        kind: 'done',
        ok: prior.outcome === 'completed' && prior.result?.ok !== false,
        output: prior.result?.output ?? null,
        error: prior.error ?? prior.result?.error ?? null,
      };
    const tool = this.deps.tools.get(spec.tool);
    const fail = (
      error: string,
      error_kind: 'validation_error' | 'permission_denied' | 'outcome_unknown' | 'hard_stop',
      result: ToolResult | null = null,
    ) =>
      this.recordOutcome(writer, tool?.manifest ?? null, {
        type: 'TOOL_FAILED',
        payload: { call_id: spec.call_id, tool: spec.tool, result, error, error_kind, duration_ms: 0 },
      });
    if (!tool) {
      await fail(`unknown tool ${spec.tool}`, 'validation_error');
      return { kind: 'done', ok: false, output: null, error: `unknown tool ${spec.tool}` };
    }
    const manifest = tool.manifest;
    const valid = this.deps.tools.validateArgs(spec.tool, spec.args);
    if (!valid.ok) {
      await fail(`invalid args for ${spec.tool}: ${valid.error}`, 'validation_error');
      return { kind: 'done', ok: false, output: null, error: valid.error };
    }
    if (prior && !manifest.idempotent) {
      const error =
        'the process stopped while this call ran; its outcome is unknown and it was not run again';
      await fail(error, 'outcome_unknown');
      return { kind: 'done', ok: false, output: null, error };
    }
    const args_hash = hashArgs(spec.tool, spec.args);
    const subject = { manifest, args: spec.args, session_id: p.session_id };

    const gate = await this.permissionGate(writer, spec, args_hash, subject);
    if (gate.kind === 'hard_stop') {
      await fail(gate.reason, 'hard_stop');
      return gate;
    }
    if (gate.kind === 'deny') {
      await fail(gate.reason, 'permission_denied');
      return { kind: 'done', ok: false, output: null, error: `permission denied: ${gate.reason}` };
    }
    if (gate.kind === 'suspend') return gate;

    const needed = [...new Set([...manifest.secrets, ...this.deps.permissions.requiredSecrets(subject)])];
    const held = this.deps.vault.forCall(p.task_id, spec.call_id);
    const missing = needed.find((n) => !held.has(n));
    if (missing) {
      if (!(p.pendingSecret?.call_id === spec.call_id && p.pendingSecret.secret_name === missing)) {
        await writer.append([
          {
            type: 'TASK_AWAITING_SECRET',
            payload: {
              request_id: newId('sec'),
              call_id: spec.call_id,
              tool: spec.tool,
              secret_name: missing,
              reason: `${spec.tool} needs ${missing}`,
            },
          },
        ]);
      }
      return { kind: 'suspend' };
    }

    const d = this.deps.discipline;
    const overBudget = d
      ? admit(writer.progress.usage, resolveBudgets(p.budgets, d.budgetDefaults, d.budgetMaximums).budgets, {
          kind: 'tool_call',
        })
      : null;
    if (overBudget)
      return {
        kind: 'hard_stop',
        reason: describeStop('budget_exceeded', overBudget.detail),
        stop_reason: 'budget_exceeded',
      };
    if (d && isCircuitOpen(toolGuardFromEvents(writer.log), spec.tool, d.circuitBreakerThreshold)) {
      const error = `circuit open: ${spec.tool} failed ${d.circuitBreakerThreshold} times in a row in this task; not run`;
      await this.recordOutcome(writer, manifest, {
        type: 'TOOL_FAILED',
        payload: {
          call_id: spec.call_id,
          tool: spec.tool,
          result: null,
          error,
          error_kind: 'tool_error',
          duration_ms: 0,
        },
      });
      return { kind: 'done', ok: false, output: null, error };
    }
    try {
      for (let attempt = (prior?.attempt ?? 0) + 1; ; attempt++) {
        const out = await this.runOnce(writer, spec, tool, held, args_hash, attempt, signal);
        if (out === 'interrupted') return { kind: 'suspend' };
        if (out.ok || !d || !out.retryable || signal.aborted)
          return { kind: 'done', ok: out.ok, output: out.output, error: out.error };
        // An idempotent tool that broke (threw, timed out) is tried again under the failure policy.
        const decision = decideFailure(out.timedOut ? 'timeout' : 'tool_error', attempt, {
          subject: 'tool',
          retry: d.retry,
          idempotent: manifest.idempotent,
          rng: this.deps.rng,
        });
        if (decision.action !== 'retry')
          return { kind: 'done', ok: false, output: out.output, error: out.error };
        await writer.append([
          guardEvent('retry', writer.progress.round, `${spec.tool}: ${decision.detail}`, {
            tool: spec.tool,
            call_id: spec.call_id,
            delay_ms: decision.delay_ms,
            next_attempt: decision.next_attempt,
          }),
        ]);
        await sleep(decision.delay_ms, signal).catch(() => undefined);
      }
    } finally {
      this.deps.vault.drop(p.task_id, spec.call_id);
    }
  }

  /** One attempt: intent, run within the (adaptive) timeout, redacted outcome. */
  private async runOnce(
    writer: TaskWriter,
    spec: CallSpec,
    tool: RegisteredTool,
    held: ReadonlyMap<string, string>,
    args_hash: string,
    attempt: number,
    signal: AbortSignal,
  ): Promise<
    | { ok: boolean; output: unknown; error: string | null; retryable: boolean; timedOut: boolean }
    | 'interrupted'
  > {
    const p = writer.progress;
    const manifest = tool.manifest;
    const d = this.deps.discipline;
    // A signature that timed out before gets more time now, up to the cap.
    const timeoutMs = d
      ? adaptiveToolTimeout(
          toolGuardFromEvents(writer.log),
          args_hash,
          manifest.timeout_ms,
          d.toolTimeoutBackoffFactor,
          d.toolTimeoutCapMs,
        )
      : manifest.timeout_ms;
    await writer.append([
      {
        type: 'TOOL_CALLED',
        payload: {
          call_id: spec.call_id,
          tool: spec.tool,
          args: spec.args,
          args_hash,
          step_id: spec.step_id,
          idempotent: manifest.idempotent,
          attempt,
        },
      },
    ]);
    const started = Date.now();
    const ctrl = new AbortController();
    const onAbort = () => ctrl.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    let timer: NodeJS.Timeout | undefined;
    const secretValues = [...held.values()];
    try {
      const timeout = new Promise<'timeout'>(
        (resolve) => (timer = setTimeout(() => (ctrl.abort(), resolve('timeout')), timeoutMs)),
      );
      const ran = await Promise.race([
        tool.run(spec.args, {
          task_id: p.task_id,
          session_id: p.session_id,
          step_id: spec.step_id,
          call_id: spec.call_id,
          signal: ctrl.signal,
          secrets: held,
        }),
        timeout,
      ]);
      const duration_ms = Date.now() - started;
      // Stopped by a shutdown: the outcome is unknown, so none is recorded; the next boot decides from the intent.
      if (isShutdown(signal)) return 'interrupted';
      if (ran === 'timeout') {
        const error = `timed out after ${timeoutMs} ms`;
        await this.recordOutcome(writer, manifest, {
          type: 'TOOL_FAILED',
          payload: {
            call_id: spec.call_id,
            tool: spec.tool,
            result: null,
            error,
            error_kind: 'timeout',
            duration_ms,
          },
        });
        return { ok: false, output: null, error, retryable: true, timedOut: true };
      }
      const result = this.deps.redact(ran, secretValues);
      if (result.ok) {
        await this.recordOutcome(writer, manifest, {
          type: 'TOOL_COMPLETED',
          payload: { call_id: spec.call_id, tool: spec.tool, result, duration_ms },
        });
      } else {
        await this.recordOutcome(writer, manifest, {
          type: 'TOOL_FAILED',
          payload: {
            call_id: spec.call_id,
            tool: spec.tool,
            result,
            error: result.error ?? 'tool failed',
            error_kind: 'tool_error',
            duration_ms,
          },
        });
      }
      // A command that ran and exited non-zero is an answer, not a breakage: repeating it changes nothing.
      return {
        ok: result.ok,
        output: result.output,
        error: result.error,
        retryable: !result.ok && !hasExitCode(result.output),
        timedOut: false,
      };
    } catch (err) {
      if (isShutdown(signal)) return 'interrupted';
      const error = this.deps.redact(
        {
          tool: spec.tool,
          ok: false,
          output: null,
          error: err instanceof Error ? err.message : String(err),
          metadata: {},
        },
        secretValues,
      ).error!;
      await this.recordOutcome(writer, manifest, {
        type: 'TOOL_FAILED',
        payload: {
          call_id: spec.call_id,
          tool: spec.tool,
          result: null,
          error,
          error_kind: 'tool_error',
          duration_ms: Date.now() - started,
        },
      });
      return { ok: false, output: null, error, retryable: true, timedOut: false };
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    }
  }

  private async permissionGate(
    writer: TaskWriter,
    spec: CallSpec,
    args_hash: string,
    subject: { manifest: ToolManifest; args: Record<string, unknown>; session_id: string },
  ): Promise<
    | { kind: 'allow' }
    | { kind: 'deny'; reason: string }
    | { kind: 'hard_stop'; reason: string }
    | { kind: 'suspend' }
  > {
    const p = writer.progress;
    const check = this.deps.permissions.check(subject);
    if (check.verdict === 'hard_stop') return { kind: 'hard_stop', reason: check.reason };
    if (check.verdict === 'deny') return { kind: 'deny', reason: check.reason };
    const mustAsk = check.verdict === 'prompt' || spec.requiresConfirmation;
    if (!mustAsk) return { kind: 'allow' };
    // A decision counts only for the call it was made for, with the same arguments.
    const decided = p.permissionDecisions.get(spec.call_id);
    if (decided && decided.args_hash === args_hash)
      return decided.decision === 'deny' ? { kind: 'deny', reason: 'denied by the user' } : { kind: 'allow' };
    if (p.pendingPermission?.call_id === spec.call_id && p.pendingPermission.args_hash === args_hash)
      return { kind: 'suspend' };
    if (await this.allowedAlwaysInSession(p.session_id, spec.tool, check.rule)) return { kind: 'allow' };
    await writer.append([
      {
        type: 'TASK_AWAITING_PERMISSION',
        payload: {
          request_id: newId('perm'),
          call_id: spec.call_id,
          tool: spec.tool,
          args: spec.args,
          args_hash,
          rule: check.rule,
          reason: check.reason,
        },
      },
    ]);
    return { kind: 'suspend' };
  }

  /** allow_always is remembered by the log: a PERMISSION_RESOLVED of this session for the same tool and rule. */
  private async allowedAlwaysInSession(
    sessionId: string,
    tool: string,
    rule: string | null,
  ): Promise<boolean> {
    const events = await this.deps.store.readAll({
      types: ['TASK_AWAITING_PERMISSION', 'PERMISSION_RESOLVED'],
    });
    const ruleOf = new Map<string, string | null>();
    for (const e of events) {
      if (e.session_id !== sessionId) continue;
      if (e.type === 'TASK_AWAITING_PERMISSION') ruleOf.set(e.payload.request_id, e.payload.rule);
      if (
        e.type === 'PERMISSION_RESOLVED' &&
        e.payload.decision === 'allow_always' &&
        e.payload.tool === tool &&
        ruleOf.get(e.payload.request_id) === rule
      )
        return true;
    }
    return false;
  }

  private async recordOutcome(
    writer: TaskWriter,
    manifest: ToolManifest | null,
    event: NewEvent,
  ): Promise<void> {
    const [stored] = await writer.append([event]);
    if (!manifest || (stored.type !== 'TOOL_COMPLETED' && stored.type !== 'TOOL_FAILED')) return;
    for (const hook of this.deps.hooks) {
      try {
        await writer.append(
          await hook({
            task_id: writer.taskId,
            session_id: writer.progress.session_id,
            event: stored,
            manifest,
          }),
        );
      } catch (err) {
        this.deps.log(`tool outcome hook failed for ${stored.payload.call_id}`, err);
      }
    }
  }
}
