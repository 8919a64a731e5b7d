import {
  DelegateArgs,
  ModelToolCall,
  NewEvent,
  PlanStep,
  TodoSpec,
  WaitArgs,
  WaitForSignalArgs,
} from '@runledger/contracts';
import { planTodoEvents } from '../../discipline/todos';
import { toolsForAgent } from '../../delegation/agent-catalog';
import { DelegationRunner } from '../../delegation/delegation-runner';
import { ToolRegistry } from '@runledger/tools';
import {
  ExecutionScheduler,
  StepStatus,
  UnknownStepReferenceError,
  substituteOutputs,
} from '@runledger/scheduler';
import { NO_RETRIES, DisciplineSettings } from '../../discipline/settings';
import { ModelGateway } from '../model-gateway';
import { CUT_OFF, ChatMessage, ModelBackend, ModelResponse, cutOff } from '../../model/model-backend';
import { distinctCallIds } from '../../model/tool-turns';
import { FAIL_FUNCTION, PLAN_FUNCTION, argsOf, toolFunctions } from '../native-tool-calls';
import {
  PlanProgress,
  TaskProgress,
  callIdFor,
  coderCallIdFor,
  keptSignal,
  planIdFor,
  resultText,
} from '../../log/progress';
import { callThroughChain } from '../provider-chain';
import { letTheLoopTurn } from '../pacing';
import { TaskWriter } from '../../log/task-writer';
import { DoneOutcome, ExecOutcome } from './call-types';
import { HardStop, StepOutcome } from '../../ports';
import { ToolCallRunner } from './tool-call-runner';
import { RecordedTimers, dueAtOf } from './timers';
import { RunClock, WALL_CLOCK } from '../../ports';

export interface PlanDeps {
  toolCalls: ToolCallRunner;
  gateway: ModelGateway;
  /** the backend that serves the coder role */
  coder: ModelBackend;
  /** providers that stand in for `coder` after its retries ran out (those that serve the coder role) */
  coderFallbacks?: readonly ModelBackend[];
  modelTimeoutMs: number;
  /** the tools a coder that speaks the tools protocol is offered */
  tools: ToolRegistry;
  /** how many tool-call replies a coder step may make before it must answer in text */
  coderToolTurns?: number;
  /** the plan's cycle check and which steps may run now (up to the step concurrency) */
  scheduler: ExecutionScheduler;
  discipline?: DisciplineSettings;
  rng?: () => number;
  /** runs agent steps; null: this runtime cannot delegate */
  delegation: DelegationRunner | null;
  /** what a timer's due time is computed from; the wall clock when absent */
  clock?: RunClock;
  /** a replay's timers: due when the recording says, never computed again */
  recordedTimers?: RecordedTimers | null;
}

const CODER_SYSTEM = 'You are the coder. Do exactly what is asked and reply with the result only.';
const CODER_TOOLS_SYSTEM =
  'You are the coder. Do exactly what is asked; call the tools you need, then reply with the result only, as text.';
export const DEFAULT_CODER_TOOL_TURNS = 8;

/**
 * The replies a coder step already had, in order, from the log: its MODEL_CALLED
 * name the step, and each answered call (no error) is one turn of its conversation.
 */
function recordedCoderReplies(writer: TaskWriter, round: number, stepId: string): ModelResponse[] {
  const calls = new Set<string>();
  const replies: ModelResponse[] = [];
  for (const e of writer.log) {
    if (
      e.type === 'MODEL_CALLED' &&
      e.payload.role === 'coder' &&
      e.payload.round === round &&
      e.payload.step_id === stepId
    )
      calls.add(e.payload.call_id);
    if (e.type === 'MODEL_RESPONDED' && calls.has(e.payload.call_id) && e.payload.error === null)
      replies.push({
        content: e.payload.content ?? '',
        usage: e.payload.usage,
        model: e.payload.model,
        finish_reason: e.payload.finish_reason,
        tool_calls: e.payload.tool_calls,
      });
  }
  return replies;
}

type StepEnd = Extract<StepOutcome, { kind: 'completed' | 'failed' }>;

const stepOutcomeOf = (done: DoneOutcome): StepEnd =>
  done.ok
    ? { kind: 'completed', output: done.output }
    : { kind: 'failed', error: done.error ?? 'tool failed' };

/** The event that ends a step that completed or failed. */
function stepEnd(plan_id: string, step_id: string, out: StepEnd): NewEvent[] {
  return out.kind === 'completed'
    ? [{ type: 'STEP_COMPLETED', payload: { plan_id, step_id, output: out.output ?? null } }]
    : [{ type: 'STEP_FAILED', payload: { plan_id, step_id, error: out.error, skipped: false } }];
}

/** A plan ended by a step's hard stop ends the task with that stop. */
export const hardStopEnd = (stop: HardStop): ExecOutcome => ({
  kind: 'end',
  stop: { stop_reason: stop.stop_reason ?? 'permission_denied', detail: stop.reason },
  result: null,
});

/**
 * Runs a plan: cycle check, PLAN_STARTED, ready steps in dependency order up to
 * the step concurrency, then PLAN_COMPLETED or the skipped steps and PLAN_FAILED.
 * Resumable: the plan's progress comes from the log, and a step that was running
 * when the process stopped runs again (its tool call decides what that means).
 */
export class PlanRunner {
  constructor(private readonly deps: PlanDeps) {}

  async run(
    writer: TaskWriter,
    steps: PlanStep[],
    round: number,
    signal: AbortSignal,
    /** the plan's declared todos: added to the task's list as the plan starts, owned by it */
    todos: readonly TodoSpec[] = [],
  ): Promise<ExecOutcome> {
    const plan_id = planIdFor(round);
    if (!writer.progress.plans.has(plan_id)) {
      const cycle = this.deps.scheduler.cycle(steps);
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
      // rides with the first step's intent
      writer.defer([
        { type: 'PLAN_STARTED', payload: { plan_id, steps } },
        ...planTodoEvents(plan_id, todos),
      ]);
    }
    const plan = writer.progress.plans.get(plan_id)!;
    const status = new Map<string, StepStatus>(
      [...plan.status].map(([id, s]) => [id, s === 'running' ? 'pending' : s]),
    );
    const inFlight = new Map<string, Promise<{ id: string; out: StepOutcome }>>();
    let failed: { id: string; error: string } | null = null;
    let suspended = false;
    let hardStop: HardStop | null = null;
    for (;;) {
      // only while none of its steps is in flight, so the order of the task's own events never depends on time
      if (inFlight.size === 0) await letTheLoopTurn(writer.progress);
      if (!failed && !suspended && !hardStop && !signal.aborted) {
        for (const step of this.deps.scheduler.ready(plan.steps, status)) {
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
    if (hardStop) return hardStopEnd(hardStop);
    if (suspended || signal.aborted) return { kind: 'suspend' };
    if (failed) {
      const skipped = [
        ...this.deps.scheduler.blocked(plan.steps, status),
        ...plan.steps.filter(
          (s) =>
            status.get(s.id) === 'pending' && !this.deps.scheduler.blocked(plan.steps, status).includes(s),
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
    // rides with what the task does next: the next round's model call, or its end
    writer.defer([
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
    // Its start needs no commit of its own: it rides with the step's first event (a tool call's intent).
    if (writer.progress.plans.get(plan_id)!.status.get(step.id) !== 'running') {
      writer.defer([
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
    // a step that was one tool call recorded its end with the call's outcome
    if (out.kind !== 'completed' && out.kind !== 'failed') return out;
    if (writer.progress.plans.get(plan_id)!.status.get(step.id) === out.kind) return out;
    await writer.append(stepEnd(plan_id, step.id, out));
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
    const plan_id = planIdFor(round);
    const call = (tool: string, callArgs: Record<string, unknown>) =>
      this.deps.toolCalls
        .run(
          writer,
          {
            call_id: callIdFor(round, step.id),
            tool,
            args: callArgs,
            step_id: step.id,
            requiresConfirmation: step.requires_confirmation,
            closing: (done) => stepEnd(plan_id, step.id, stepOutcomeOf(done)),
          },
          signal,
        )
        .then((r): StepOutcome => (r.kind === 'done' ? stepOutcomeOf(r) : r));
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
      case 'coder':
        return this.coderStep(writer, args, step, round, signal);
      case 'agent': {
        if (!this.deps.delegation) return { kind: 'failed', error: 'this runtime cannot delegate' };
        const delegation = DelegateArgs.safeParse(args);
        if (!delegation.success)
          return { kind: 'failed', error: `invalid agent step: ${delegation.error.issues[0].message}` };
        return this.deps.delegation.run(
          writer,
          { call_id: callIdFor(round, step.id), step_id: step.id, args: delegation.data },
          signal,
        );
      }
      case 'wait':
        return this.waitStep(writer, args, step, round);
      case 'wait_for_signal':
        return this.waitForSignalStep(writer, args, step, round);
    }
  }

  /**
   * A durable wait for a signal: SIGNAL_AWAITED (with a TIMER_SET of the same id for a timeout), and
   * in the same commit the oldest kept signal of the name when one came before. Otherwise the task
   * waits, holding nothing, until a signal's sender delivers it (SIGNAL_DELIVERED) or the timer
   * fires; the step runs again then and ends with the signal, or fails as timed out.
   */
  private async waitForSignalStep(
    writer: TaskWriter,
    args: Record<string, unknown>,
    step: PlanStep,
    round: number,
  ): Promise<StepOutcome> {
    const wait_id = callIdFor(round, step.id);
    const ended = (p: TaskProgress): StepOutcome | null => {
      const wait = p.signalWaits.get(wait_id);
      if (!wait?.outcome) return null;
      if (wait.outcome.kind === 'timeout')
        return {
          kind: 'failed',
          error: `timeout: no signal "${wait.awaited.name}" within ${wait.awaited.timeout_ms} ms`,
        };
      const signal = p.signals.get(wait.outcome.signal_id)!.received;
      return {
        kind: 'completed',
        output: { signal: signal.name, signal_id: signal.signal_id, payload: signal.payload },
      };
    };
    const deliver = (p: TaskProgress, name: string): NewEvent[] => {
      const kept = keptSignal(p, name);
      return kept
        ? [{ type: 'SIGNAL_DELIVERED', payload: { wait_id, signal_id: kept.signal_id, name } }]
        : [];
    };
    if (writer.progress.signalWaits.has(wait_id)) {
      const end = ended(writer.progress);
      if (end) return end;
      // a signal kept when the wait started that its own commit did not take (it came in between)
      const late = deliver(writer.progress, writer.progress.signalWaits.get(wait_id)!.awaited.name);
      if (late.length === 0) return { kind: 'suspend' };
      await writer.append(late);
      return ended(writer.progress) ?? { kind: 'suspend' };
    }
    const wait = WaitForSignalArgs.safeParse(args);
    if (!wait.success)
      return { kind: 'failed', error: `invalid wait_for_signal step: ${wait.error.issues[0].message}` };
    const { name, timeout_ms } = wait.data;
    const counts_against_timeout = writer.progress.settings?.timeout_includes_waits === true;
    const timer: NewEvent[] =
      timeout_ms === undefined
        ? []
        : [
            {
              type: 'TIMER_SET',
              payload: {
                timer_id: wait_id,
                step_id: step.id,
                due_at:
                  this.deps.recordedTimers?.dueAt(wait_id) ??
                  dueAtOf({ duration_ms: timeout_ms }, (this.deps.clock ?? WALL_CLOCK).now()),
                duration_ms: timeout_ms,
                until: null,
                counts_against_timeout,
              },
            },
          ];
    await writer.append([
      {
        type: 'SIGNAL_AWAITED',
        payload: { wait_id, step_id: step.id, name, timeout_ms: timeout_ms ?? null, counts_against_timeout },
      },
      ...timer,
      ...deliver(writer.progress, name),
    ]);
    // the append may have met a signal sent meanwhile (the writer folded it in before this wait): taken now
    return this.waitForSignalStep(writer, args, step, round);
  }

  /**
   * A durable timer: set once (TIMER_SET, its due time computed here and never again), then the task
   * waits without a lease or a run slot until an instance fires it (TIMER_FIRED); the step runs again
   * then and completes.
   */
  private async waitStep(
    writer: TaskWriter,
    args: Record<string, unknown>,
    step: PlanStep,
    round: number,
  ): Promise<StepOutcome> {
    const timer_id = callIdFor(round, step.id);
    const timer = writer.progress.timers.get(timer_id);
    if (timer?.fired) return { kind: 'completed', output: { waited_until: timer.set.due_at } };
    if (timer) return { kind: 'suspend' };
    const wait = WaitArgs.safeParse(args);
    if (!wait.success) return { kind: 'failed', error: `invalid wait step: ${wait.error.issues[0].message}` };
    const due_at =
      this.deps.recordedTimers?.dueAt(timer_id) ?? dueAtOf(wait.data, (this.deps.clock ?? WALL_CLOCK).now());
    await writer.append([
      {
        type: 'TIMER_SET',
        payload: {
          timer_id,
          step_id: step.id,
          due_at,
          duration_ms: 'duration_ms' in wait.data ? wait.data.duration_ms : null,
          until: 'until' in wait.data ? wait.data.until : null,
          counts_against_timeout: writer.progress.settings?.timeout_includes_waits === true,
        },
      },
    ]);
    return { kind: 'suspend' };
  }

  /**
   * Retries, then the next provider, as for the orchestrator; at the end of the
   * chain the step fails. A coder that speaks the tools protocol is offered the
   * tools: its calls run under the step (each through the ToolCallRunner, with
   * an id from the step, turn and position), their results go back as tool
   * messages, and it is asked again until it answers in text, the step's output.
   * Replies already in the log are not asked again, and calls already done are
   * not run again, so a suspended or interrupted step resumes where it stopped.
   */
  private async coderStep(
    writer: TaskWriter,
    args: Record<string, unknown>,
    step: PlanStep,
    round: number,
    signal: AbortSignal,
  ): Promise<StepOutcome> {
    if (!this.deps.coder.modelFor('coder')) return { kind: 'failed', error: 'no coder model configured' };
    const prompt = String(args.prompt ?? step.description);
    const withTools = this.deps.coder.speaksToolCalls('coder');
    const messages: ChatMessage[] = [
      { role: 'system', content: withTools ? CODER_TOOLS_SYSTEM : CODER_SYSTEM },
      { role: 'user', content: prompt },
    ];
    // a delegated agent's coder is offered only the tools the agent may use
    const tools = withTools
      ? toolFunctions(toolsForAgent(this.deps.tools.list(), writer.progress.agent)).filter(
          (f) => f.name !== PLAN_FUNCTION,
        )
      : undefined;
    const recorded = withTools ? recordedCoderReplies(writer, round, step.id) : [];
    const maxTurns = this.deps.coderToolTurns ?? DEFAULT_CODER_TOOL_TURNS;
    for (let turn = 0; ; turn++) {
      const reply = recorded[turn] ?? (await this.askCoder(writer, messages, tools, step, round, signal));
      if (typeof reply === 'string') return { kind: 'failed', error: reply };
      const calls = reply.tool_calls ?? [];
      if (cutOff(reply)) return { kind: 'failed', error: `coder: ${CUT_OFF}` };
      if (calls.length === 0) return { kind: 'completed', output: reply.content };
      const fail = calls.find((c) => c.name === FAIL_FUNCTION);
      if (fail) {
        const parsed = argsOf(fail);
        const reason = parsed.ok ? String(parsed.args.reason ?? fail.arguments) : fail.arguments;
        return { kind: 'failed', error: `coder gave up: ${reason}` };
      }
      if (turn + 1 >= maxTurns)
        return { kind: 'failed', error: `coder: no text answer after ${maxTurns} tool-call replies` };
      const answers: ChatMessage[] = [];
      // sent back with an id each, even when the coder gave two calls one (the request would be refused)
      const sent = distinctCallIds(calls);
      for (const [k, call] of calls.entries()) {
        const answer = await this.runCoderCall(
          writer,
          call,
          coderCallIdFor(round, step.id, turn, k),
          step,
          signal,
        );
        if (answer.kind !== 'answer') return answer;
        answers.push({ role: 'tool', tool_call_id: sent[k].id, content: answer.content });
      }
      messages.push({ role: 'assistant', content: reply.content, tool_calls: sent }, ...answers);
    }
  }

  /** one coder tool call through the ToolCallRunner: what the coder reads of it, or the suspension or stop it led to */
  private async runCoderCall(
    writer: TaskWriter,
    call: ModelToolCall,
    call_id: string,
    step: PlanStep,
    signal: AbortSignal,
  ): Promise<{ kind: 'answer'; content: string } | Exclude<StepOutcome, { kind: 'completed' | 'failed' }>> {
    const args = argsOf(call);
    if (!args.ok) return { kind: 'answer', content: `error: ${args.error}` };
    const out = await this.deps.toolCalls.run(
      writer,
      {
        call_id,
        tool: call.name,
        args: args.args,
        step_id: step.id,
        requiresConfirmation: step.requires_confirmation,
      },
      signal,
    );
    if (out.kind !== 'done') return out;
    return {
      kind: 'answer',
      content: out.ok ? resultText(out.output) : `error: ${out.error ?? 'tool failed'}`,
    };
  }

  /** the coder's next reply down its provider chain, or why there is none */
  private async askCoder(
    writer: TaskWriter,
    messages: ChatMessage[],
    tools: ReturnType<typeof toolFunctions> | undefined,
    step: PlanStep,
    round: number,
    signal: AbortSignal,
  ): Promise<ModelResponse | string> {
    const chain = [
      this.deps.coder,
      ...(this.deps.coderFallbacks ?? []).filter((b) => b.modelFor('coder') !== null),
    ];
    try {
      const out = await callThroughChain({
        gateway: this.deps.gateway,
        writer,
        chain,
        role: 'coder',
        round,
        step_id: step.id,
        request: {
          messages: [...messages],
          ...(tools ? { tools } : {}),
          timeout_ms: this.deps.modelTimeoutMs,
          signal,
        },
        retry: this.deps.discipline?.retry ?? NO_RETRIES,
        rng: this.deps.rng,
      });
      if (out.ok) return out.res;
      return `coder: ${(out.error as Error).message}`;
    } catch (err) {
      return `coder: ${(err as Error).message}`;
    }
  }
}
