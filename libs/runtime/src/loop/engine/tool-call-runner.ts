import {
  EventPayload,
  MCP_ELICITATION_RULE,
  NewEvent,
  PendingToolOutcome,
  ToolManifest,
  ToolResult,
  hashArgs,
  newId,
} from '@runledger/contracts';
import { PermissionService } from '@runledger/permissions';
import { ElicitationAnswer, RegisteredTool, ToolInputRequired, ToolRegistry } from '@runledger/tools';
import { adaptiveToolTimeout, decideFailure, hasExitCode } from '../../discipline/failure-policy';
import { guardEvent } from '../../discipline/retry-runner';
import { decideTodoCall, isTodoTool } from '../../discipline/todos';
import { priceModelCalls } from '../../discipline/budgets';
import { DisciplineSettings } from '../../discipline/settings';
import { sleep } from '../../model/model-backend';
import { SecretVault, ToolOutcomeHook, isShutdown } from '../../ports';
import { TaskWriter } from '../../log/task-writer';
import { elicitationCallId } from '../../log/progress';
import { isReadOnlyTool } from '../round-policy';
import { AllowAlwaysGrants } from './allow-always-grants';
import { CallOutcome, CallSpec } from './call-types';
import { AgentToolsGate } from './gates/agent-tools-gate';
import { BudgetGate } from './gates/budget-gate';
import { CircuitBreakerGate } from './gates/circuit-breaker-gate';
import { ElicitationGate } from './gates/elicitation-gate';
import { InterruptedCallGate } from './gates/interrupted-call-gate';
import { PermissionGate } from './gates/permission-gate';
import { SecretGate } from './gates/secret-gate';
import { RoundSurfaceGate } from './gates/round-surface-gate';
import { ToolBudgetGate } from './gates/tool-budget-gate';
import { ALLOW, GateCall, GateVerdict, ToolGate } from './gates/tool-gate';
import { ValidateGate } from './gates/validate-gate';
import { ClientArgsGate, awaitsClient, clientRegisteredTool, clientToolRequest } from './client-tools';

export interface ToolCallDeps {
  tools: ToolRegistry;
  permissions: PermissionService;
  vault: SecretVault;
  hooks: readonly ToolOutcomeHook[];
  grants: AllowAlwaysGrants;
  redact: (value: ToolResult, secrets: readonly string[]) => ToolResult;
  /** run discipline: budgets, circuit breaker, adaptive timeouts, retries of idempotent tools; off when absent */
  discipline?: DisciplineSettings;
  rng?: () => number;
  log: (message: string, err?: unknown) => void;
}

type AttemptOutcome =
  | {
      ok: boolean;
      output: unknown;
      error: string | null;
      retryable: boolean;
      timedOut: boolean;
      /** the outcome and its hooks' events, not yet written */
      record: NewEvent[];
    }
  | 'interrupted';

/** Where a call ended, and the events to write for it (in one append with the caller's closing events). */
interface Settled {
  outcome: CallOutcome;
  record: NewEvent[];
}

type ToolOutcomeBody = Extract<NewEvent, { type: 'TOOL_COMPLETED' | 'TOOL_FAILED' }>;

/** The pre-call checks in the order they apply; budgets and the circuit breaker belong to run discipline. */
export function toolGates(deps: ToolCallDeps): ToolGate[] {
  const gates: ToolGate[] = [
    new RoundSurfaceGate(),
    new ToolBudgetGate(),
    new ValidateGate(deps.tools),
    new AgentToolsGate(),
    new ElicitationGate(),
    new InterruptedCallGate(),
    new PermissionGate(deps.permissions, deps.grants),
    new SecretGate(deps.permissions, deps.vault),
  ];
  if (deps.discipline)
    gates.push(
      new BudgetGate(deps.discipline),
      new CircuitBreakerGate(deps.discipline.circuitBreakerThreshold),
    );
  return gates;
}

/**
 * The checks a call to a tool the client offered passes before the client is asked: the round's
 * surface, its arguments against the offered schema, the agent's tools, and run discipline.
 * Permissions and secrets are the client's own to handle: the tool runs there.
 */
export function clientToolGates(deps: ToolCallDeps): ToolGate[] {
  return toolGates(deps).flatMap((gate) =>
    gate instanceof ValidateGate
      ? [new ClientArgsGate()]
      : gate instanceof RoundSurfaceGate ||
          gate instanceof AgentToolsGate ||
          gate instanceof BudgetGate ||
          gate instanceof CircuitBreakerGate
        ? [gate]
        : [],
  );
}

/**
 * One tool call, resumable: a recorded outcome is returned as is; otherwise
 * the gates judge the call, then TOOL_CALLED, the sandboxed run within its
 * (adaptive) timeout, the redacted outcome and the outcome hooks, with retries
 * of an idempotent tool that broke.
 */
export class ToolCallRunner {
  private readonly gates: readonly ToolGate[];
  private readonly clientGates: readonly ToolGate[];

  constructor(private readonly deps: ToolCallDeps) {
    this.gates = toolGates(deps);
    this.clientGates = clientToolGates(deps);
  }

  /**
   * The call's outcome goes in one batch with what the outcome hooks returned
   * and the caller's `closing` events (the plan step's end). A finished call's
   * batch needs no commit of its own: it rides with the task's next append
   * (the next call's intent, the next model call, the end), so a tool call
   * costs one commit, its intent, made durable before the tool runs; the
   * intent of a read-only, idempotent tool's first attempt needs none of its
   * own either. A call that waits for a person is appended at once.
   */
  async run(writer: TaskWriter, spec: CallSpec, signal: AbortSignal): Promise<CallOutcome> {
    const { outcome, record } = await this.decide(writer, spec, signal);
    const closing = outcome.kind === 'done' ? (spec.closing?.(outcome) ?? []) : [];
    const batch = [...record, ...closing];
    if (batch.length === 0) return outcome;
    if (outcome.kind === 'done') writer.defer(batch);
    else await writer.append(batch);
    return outcome;
  }

  /** What the call came to, and the events that say so, not yet written. */
  private async decide(writer: TaskWriter, spec: CallSpec, signal: AbortSignal): Promise<Settled> {
    const p = writer.progress;
    const prior = p.calls.get(spec.call_id);
    if (prior?.outcome)
      return {
        outcome: {
          kind: 'done',
          ok: prior.outcome === 'completed' && prior.result?.ok !== false,
          output: prior.result?.output ?? null,
          error: prior.error ?? prior.result?.error ?? null,
        },
        record: [],
      };
    // The runtime's own todo tool changes nothing but the log: no gate, no sandbox, no outcome hooks.
    if (isTodoTool(spec.tool)) return this.todoCall(writer, spec);
    // A tool the client offered runs there: once it is asked for, the call waits for its answer.
    const offered = p.clientTools.get(spec.tool);
    if (offered && awaitsClient(p, spec.call_id)) return { outcome: { kind: 'suspend' }, record: [] };
    const tool = offered ? clientRegisteredTool(offered) : this.deps.tools.get(spec.tool);
    // Nothing to gate without a tool: the call fails as invalid, with no manifest for the outcome hooks.
    if (!tool) {
      const error = `unknown tool ${spec.tool}`;
      return {
        outcome: { kind: 'done', ok: false, output: null, error },
        record: await this.failureEvents(writer, spec, null, error, 'validation_error'),
      };
    }
    const args_hash = hashArgs(spec.tool, spec.args);
    const verdict = await this.judge(offered ? this.clientGates : this.gates, {
      spec,
      tool,
      args_hash,
      progress: p,
      fold: writer.fold,
      prior,
    });
    // the outcome hooks (critic, memory) judge what ran here, not the client's tools
    const hooked = offered ? null : tool.manifest;
    switch (verdict.kind) {
      case 'allow':
        break;
      case 'suspend':
        return { outcome: { kind: 'suspend' }, record: verdict.events };
      case 'deny':
        return {
          outcome: { kind: 'done', ok: false, output: null, error: verdict.step_error },
          record: await this.failureEvents(writer, spec, hooked, verdict.error, verdict.error_kind),
        };
      case 'hard_stop':
        return {
          outcome: { kind: 'hard_stop', reason: verdict.reason, stop_reason: verdict.stop_reason },
          record: verdict.recordFailure
            ? await this.failureEvents(writer, spec, hooked, verdict.reason, 'hard_stop')
            : [],
        };
    }
    if (offered) return { outcome: { kind: 'suspend' }, record: clientToolRequest(spec, args_hash) };
    return this.runAttempts(writer, spec, tool, args_hash, (prior?.attempt ?? 0) + 1, signal);
  }

  /** The first gate that does not allow the call decides. */
  private async judge(gates: readonly ToolGate[], call: GateCall): Promise<GateVerdict> {
    for (const gate of gates) {
      const verdict = await gate.check(call);
      if (verdict.kind !== 'allow') return verdict;
    }
    return ALLOW;
  }

  private async runAttempts(
    writer: TaskWriter,
    spec: CallSpec,
    tool: RegisteredTool,
    args_hash: string,
    firstAttempt: number,
    signal: AbortSignal,
  ): Promise<Settled> {
    const p = writer.progress;
    const d = this.deps.discipline;
    const held = this.deps.vault.forCall(p.task_id, spec.call_id);
    const answers = new LoggedAnswers(writer, this.deps.vault, spec.call_id);
    let suspended = false;
    try {
      for (let attempt = firstAttempt; ; attempt++) {
        const out = await this.runOnce(writer, spec, tool, held, answers, args_hash, attempt, signal);
        if (out === 'interrupted') {
          suspended = true;
          return { outcome: { kind: 'suspend' }, record: [] };
        }
        const done = (): Settled => ({
          outcome: { kind: 'done', ok: out.ok, output: out.output, error: out.error },
          record: out.record,
        });
        if (out.ok || !d || !out.retryable || signal.aborted) return done();
        // An idempotent tool that broke (threw, timed out) is tried again under the failure policy.
        const decision = decideFailure(out.timedOut ? 'timeout' : 'tool_error', attempt, {
          subject: 'tool',
          retry: d.retry,
          idempotent: tool.manifest.idempotent,
          rng: this.deps.rng,
        });
        if (decision.action !== 'retry') return done();
        await writer.append([
          ...out.record,
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
      // a secret the server asked for is kept until the call it was for has its outcome
      if (!suspended) for (const id of answers.secretIds) this.deps.vault.drop(p.task_id, id);
    }
  }

  /** One attempt: intent, run within the (adaptive) timeout, redacted outcome. */
  private async runOnce(
    writer: TaskWriter,
    spec: CallSpec,
    tool: RegisteredTool,
    held: ReadonlyMap<string, string>,
    answers: LoggedAnswers,
    args_hash: string,
    attempt: number,
    signal: AbortSignal,
  ): Promise<AttemptOutcome> {
    const p = writer.progress;
    const manifest = tool.manifest;
    const d = this.deps.discipline;
    // A signature that timed out before gets more time now, up to the cap.
    const timeoutMs = d
      ? adaptiveToolTimeout(
          writer.fold.toolGuard,
          args_hash,
          manifest.timeout_ms,
          d.toolTimeoutBackoffFactor,
          d.toolTimeoutCapMs,
        )
      : manifest.timeout_ms;
    // A first attempt of a tool that changes nothing outside the task and may run again leaves nothing
    // unrecorded if the process stops before its intent is stored, and is simply run again: its intent
    // rides with its outcome's commit. (A retry's intent is stored first: after a stop, the call's last
    // record would otherwise be the failed attempt before it, and it would not be retried.)
    // (read-only as the round policy counts it: a manifest's read_only, or a built-in that only reads)
    const defersIntent = isReadOnlyTool(manifest) && manifest.idempotent && attempt === 1;
    const intent: NewEvent = {
      type: 'TOOL_CALLED',
      payload: {
        call_id: spec.call_id,
        tool: spec.tool,
        // stored after the tool ran: a copy, in case the tool changes what it was given
        args: defersIntent ? structuredClone(spec.args) : spec.args,
        args_hash,
        step_id: spec.step_id,
        idempotent: manifest.idempotent,
        attempt,
      },
    };
    if (defersIntent) writer.defer([intent]);
    else await writer.append([intent]);
    const started = Date.now();
    const ctrl = new AbortController();
    // A tool that ignores its signal must not hold the task past a cancel or its deadline: the
    // abort settles the call as the tool's own rejection would (recorded, unless it is a shutdown).
    let abandon: (reason: Error) => void = () => undefined;
    const abandoned = new Promise<never>((_, reject) => (abandon = reject));
    const onAbort = () => {
      ctrl.abort();
      const why = signal.reason instanceof Error ? signal.reason.message : 'cancelled';
      abandon(new Error(`${spec.tool} stopped with its task: ${why}`));
    };
    signal.addEventListener('abort', onAbort, { once: true });
    if (signal.aborted) onAbort();
    let timer: NodeJS.Timeout | undefined;
    // the secrets its server asked for join these as they are handed to it
    const secretValues = [...held.values()];
    answers.onSecret = (value) => secretValues.push(value);
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
          elicitationAnswer: (index) => answers.answer(index),
        }),
        timeout,
        abandoned,
      ]);
      const duration_ms = Date.now() - started;
      // Stopped by a shutdown: the outcome is unknown, so none is recorded; the next boot decides from the intent.
      if (isShutdown(signal)) return 'interrupted';
      if (ran === 'timeout') {
        const error = `timed out after ${timeoutMs} ms`;
        const record = await this.failureEvents(writer, spec, manifest, error, 'timeout', null, duration_ms);
        return { ok: false, output: null, error, retryable: true, timedOut: true, record };
      }
      const result = this.deps.redact(ran, secretValues);
      const record = result.ok
        ? await this.outcomeEvents(writer, manifest, {
            type: 'TOOL_COMPLETED',
            payload: { call_id: spec.call_id, tool: spec.tool, result, duration_ms },
          })
        : await this.failureEvents(
            writer,
            spec,
            manifest,
            result.error ?? 'tool failed',
            'tool_error',
            result,
            duration_ms,
          );
      // A command that ran and exited non-zero is an answer, not a breakage: repeating it changes nothing.
      return {
        ok: result.ok,
        output: result.output,
        error: result.error,
        retryable: !result.ok && !hasExitCode(result.output),
        timedOut: false,
        record,
      };
    } catch (err) {
      if (err instanceof ToolInputRequired) {
        await writer.append([inputRequest(spec, err)]);
        return 'interrupted';
      }
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
      const record = await this.failureEvents(
        writer,
        spec,
        manifest,
        error,
        'tool_error',
        null,
        Date.now() - started,
      );
      return { ok: false, output: null, error, retryable: true, timedOut: false, record };
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    }
  }

  private async todoCall(writer: TaskWriter, spec: CallSpec): Promise<Settled> {
    const decision = decideTodoCall(writer.progress.todos, spec.tool, spec.args, {
      round: writer.progress.round,
      call_id: spec.call_id,
    });
    const called: NewEvent = {
      type: 'TOOL_CALLED',
      payload: {
        call_id: spec.call_id,
        tool: spec.tool,
        args: spec.args,
        args_hash: hashArgs(spec.tool, spec.args),
        step_id: spec.step_id,
        idempotent: false,
        attempt: 1,
      },
    };
    if (!decision.ok)
      return {
        outcome: { kind: 'done', ok: false, output: null, error: decision.error },
        record: [
          called,
          ...(await this.failureEvents(writer, spec, null, decision.error, 'validation_error')),
        ],
      };
    const result: ToolResult = {
      tool: spec.tool,
      ok: true,
      output: decision.output,
      error: null,
      metadata: {},
    };
    return {
      outcome: { kind: 'done', ok: true, output: decision.output, error: null },
      record: [
        called,
        ...decision.events,
        {
          type: 'TOOL_COMPLETED',
          payload: { call_id: spec.call_id, tool: spec.tool, result, duration_ms: 0 },
        },
      ],
    };
  }

  private failureEvents(
    writer: TaskWriter,
    spec: CallSpec,
    manifest: ToolManifest | null,
    error: string,
    error_kind: EventPayload<'TOOL_FAILED'>['error_kind'],
    result: ToolResult | null = null,
    duration_ms = 0,
  ): Promise<NewEvent[]> {
    return this.outcomeEvents(writer, manifest, {
      type: 'TOOL_FAILED',
      payload: { call_id: spec.call_id, tool: spec.tool, result, error, error_kind, duration_ms },
    });
  }

  /**
   * The outcome event, then what every outcome hook (critic, memory) returned
   * for it, to be appended together; a failing hook is logged, not fatal. The
   * hooks see the outcome before it is stored, under the event id it will be
   * stored with. Model calls a hook made are priced like the runtime's own.
   */
  private async outcomeEvents(
    writer: TaskWriter,
    manifest: ToolManifest | null,
    outcome: ToolOutcomeBody,
  ): Promise<NewEvent[]> {
    const event = { ...outcome, event_id: newId('evt') } as NewEvent & { event_id: string };
    if (!manifest) return [event];
    const pending = { ...outcome, event_id: event.event_id, task_id: writer.taskId } as PendingToolOutcome;
    const events: NewEvent[] = [event];
    for (const hook of this.deps.hooks) {
      try {
        const returned = await hook({
          task_id: writer.taskId,
          session_id: writer.progress.session_id,
          event: pending,
          manifest,
          events: writer.log,
        });
        events.push(...priceModelCalls(returned, this.deps.discipline?.prices ?? {}));
      } catch (err) {
        this.deps.log(`tool outcome hook failed for ${outcome.payload.call_id}`, err);
      }
    }
    return events;
  }
}

/**
 * The answers the log holds to the questions a call's server asks, by their place in the call: a
 * form's decision and content from PERMISSION_RESOLVED, a secret from the vault (in memory only;
 * after a restart it is asked for again).
 */
class LoggedAnswers {
  /** the elicitation ids whose secrets were handed over, dropped once the call has its outcome */
  readonly secretIds: string[] = [];
  onSecret: (value: string) => void = () => undefined;

  constructor(
    private readonly writer: TaskWriter,
    private readonly vault: SecretVault,
    private readonly callId: string,
  ) {}

  answer(index: number): ElicitationAnswer | undefined {
    const id = elicitationCallId(this.callId, index);
    const decided = this.writer.progress.permissionDecisions.get(id);
    if (decided)
      return decided.decision === 'deny'
        ? { action: 'decline' }
        : { action: 'accept', content: decided.content ?? {} };
    const secrets = this.vault.forCall(this.writer.taskId, id);
    if (secrets.size === 0) return undefined;
    this.secretIds.push(id);
    for (const value of secrets.values()) this.onSecret(value);
    return { action: 'accept', content: Object.fromEntries(secrets) };
  }
}

/** The request for the person a server's question becomes: a secret (never logged) or a form. */
function inputRequest(spec: CallSpec, needed: ToolInputRequired): NewEvent {
  const call_id = elicitationCallId(spec.call_id, needed.index);
  const reason = `${spec.tool} asks: ${needed.request.message}`;
  if (needed.secretField)
    return {
      type: 'TASK_AWAITING_SECRET',
      payload: {
        request_id: newId('sec'),
        call_id,
        tool: spec.tool,
        secret_name: needed.secretField,
        reason,
      },
    };
  const args = { message: needed.request.message, requested_schema: needed.request.requested_schema };
  return {
    type: 'TASK_AWAITING_PERMISSION',
    payload: {
      request_id: newId('perm'),
      call_id,
      tool: spec.tool,
      args,
      args_hash: hashArgs(spec.tool, args),
      rule: MCP_ELICITATION_RULE,
      reason,
    },
  };
}
