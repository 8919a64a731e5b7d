import { ConfigError, LeaseLostError, RunSettings, TaskStatus } from '@runledger/contracts';
import { ToolRegistry } from '@runledger/tools';
import { PermissionService } from '@runledger/permissions';
import { EventStore } from '@runledger/event-store';
import { EventType, NewEvent, RuntimeEvent } from '@runledger/contracts';
import { AsyncRouter } from './async-router';
import { ContextBuilder } from './context-builder';
import { ExecutionEngine } from './execution-engine';
import { INPUT_REFUSED, RunClock, Stop, WALL_CLOCK, isShutdown } from '../ports';
import { LoopGuard } from './guards/loop-guard';
import { TaskProgress } from '../log/progress';
import { TaskEndListener, TaskEndedElsewhereError, TaskWriter, WriterLease } from '../log/task-writer';
import { TaskCheckpoints } from '../log/checkpoints';
import { SubmissionPacing, letTheLoopTurn } from './pacing';
import { describeStop } from '../discipline/stop-reasons';
import { FailureError } from '../model/failure-error';
import { toolsForAgent } from '../delegation/agent-catalog';
import { decideSurface, deterministicEnd, isRoundPolicyOn, runtimeAnswer } from './round-policy';
import { withinBudgets } from './tool-budgets';
import { clientToolManifests } from './engine/client-tools';
import { AnswerEvaluation } from './guards/answer-evaluation';
import { sessionPressureOf } from '../discipline/session-budget';

export interface LoopDeps {
  store: EventStore;
  tools: ToolRegistry;
  permissions: PermissionService;
  context: ContextBuilder;
  router: AsyncRouter;
  engine: ExecutionEngine;
  guards: readonly LoopGuard[];
  /** default hard cap of rounds; a task's budgets.max_rounds may lower it */
  maxRounds: number;
  /** a task's checkpoints, given its log; none when absent */
  checkpoints?: ((log: readonly RuntimeEvent[]) => TaskCheckpoints) | null;
  /** what the end-to-end deadline is timed by; the wall clock when absent */
  clock?: RunClock;
  /** the parts a fork runs with: those of the settings its TASK_RECEIVED recorded, with the orchestrator it named */
  recordedShape?: (settings: RunSettings | null, model: string | null) => ShapedLoopParts;
  /** gives arriving submissions the event loop first: a running task waits its turn before each step */
  pacing?: SubmissionPacing | null;
  /** scores a final answer before the task ends, for tasks whose settings or agent ask for it */
  evaluation?: AnswerEvaluation | null;
}

/** The parts of the loop that run settings shape. */
export type ShapedLoopParts = Pick<LoopDeps, 'context' | 'router' | 'engine' | 'guards' | 'maxRounds'>;

/** Why a task whose end-to-end deadline passed while something ran (a model call, a tool) was stopped. */
export const DEADLINE_PASSED = 'the task ran over its end-to-end time budget';

/** A task in one of these waits, holding no lease and no run slot, for a person, the client or a timer. */
export const SUSPENDED_STATUSES: readonly TaskStatus[] = [
  'awaiting_permission',
  'awaiting_secret',
  'awaiting_client_tool',
  'waiting',
];

const CANCELLED: Stop = { stop_reason: 'cancelled', detail: 'cancelled by request' };

/**
 * What the last end guard may record in the final event's commit: events the
 * usage meter does not count, since the final event's usage is read from the
 * fold before that commit. A guard's other events commit on their own first.
 */
const UNMETERED_CLOSING_TYPES: ReadonlySet<EventType> = new Set<EventType>([
  'MEMORY_WRITTEN',
  'ACCEPTANCE_DECIDED',
]);

/** Where a run left its task. */
export interface TaskRunEnd {
  /** as the task's writer folded it */
  progress: TaskProgress;
  /** the log holds every event of that fold: it equals a fold of the log (false: a failed append was folded) */
  inLog: boolean;
}

const runEnd = (writer: TaskWriter): TaskRunEnd => ({
  progress: writer.progress,
  inLog: writer.committedThrough === writer.progress.last_seq,
});

/**
 * Runs one task from wherever its log says it is. Each turn decides the next
 * action from the progress folded from the log alone (kept current by the
 * task's writer), so a task resumed after a restart continues exactly where
 * its events end.
 */
export class RuntimeLoop {
  constructor(private readonly deps: LoopDeps) {}

  /**
   * With a lease every append is fenced by it; a lost lease ends the run quietly, leaving the task to its new owner.
   * `final` hears the final event handed to the store, then committed (see TaskEndListener).
   */
  async runTask(
    taskId: string,
    signal: AbortSignal,
    lease?: WriterLease,
    final?: TaskEndListener,
  ): Promise<TaskRunEnd> {
    const writer = await TaskWriter.open(this.deps.store, taskId, this.deps.checkpoints, lease, final);
    try {
      return await this.runWith(writer, signal);
    } finally {
      writer.close();
    }
  }

  private async runWith(writer: TaskWriter, signal: AbortSignal): Promise<TaskRunEnd> {
    // A fork continues under the settings its source recorded, not under this process's, and with the model it asked for.
    const [first] = writer.log;
    if (
      first?.type === 'TASK_RECEIVED' &&
      first.payload.source === 'fork' &&
      (first.payload.settings || first.payload.model)
    ) {
      let shape: ShapedLoopParts | undefined;
      try {
        shape = this.deps.recordedShape?.(first.payload.settings ?? null, first.payload.model ?? null);
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        // The model the fork was started with cannot be run here (this process is configured otherwise).
        if (!writer.progress.final)
          await this.end(writer, { stop_reason: 'provider_error', detail: err.message }, null);
        return runEnd(writer);
      }
      if (shape)
        return new RuntimeLoop({ ...this.deps, ...shape, recordedShape: undefined }).run(writer, signal);
    }
    return this.run(writer, signal);
  }

  private async run(writer: TaskWriter, signal: AbortSignal): Promise<TaskRunEnd> {
    // The task's end-to-end deadline aborts whatever runs (model call, tool) like a cancel, with its own reason.
    const ctrl = new AbortController();
    const onAbort = () => ctrl.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    if (signal.aborted) onAbort();
    const remaining = this.deps.guards
      .map(
        (g) => g.remainingMs?.({ progress: writer.progress, events: writer.log, fold: writer.fold }) ?? null,
      )
      .filter((ms): ms is number => ms !== null);
    const cancelTimer = remaining.length
      ? (this.deps.clock ?? WALL_CLOCK).after(Math.max(0, Math.min(...remaining)), () =>
          ctrl.abort(new FailureError('timeout', DEADLINE_PASSED)),
        )
      : undefined;
    try {
      await this.drive(writer, ctrl.signal);
    } catch (err) {
      if (!(err instanceof TaskEndedElsewhereError || err instanceof LeaseLostError)) throw err;
    } finally {
      cancelTimer?.();
      signal.removeEventListener('abort', onAbort);
    }
    return runEnd(writer);
  }

  private async drive(writer: TaskWriter, signal: AbortSignal): Promise<void> {
    // a task queued behind another of its session waits for its turn (SessionTurns begins it)
    const runsNoMore = (p: TaskProgress) =>
      Boolean(p.final) ||
      p.queuedBehind !== null ||
      (SUSPENDED_STATUSES.includes(p.status) && p.interruptedBy === null);
    for (;;) {
      let p = writer.progress;
      if (runsNoMore(p)) return;
      // the safe point of an interrupt: between rounds and steps, or at once for a task that waits
      if (p.interruptedBy !== null) {
        await this.end(
          writer,
          { stop_reason: 'interrupted', detail: `interrupted by task ${p.interruptedBy} of the session` },
          null,
        );
        continue;
      }
      if (this.deps.pacing) {
        // only timing changes: what the step does is decided from the progress after the wait
        await this.deps.pacing.beforeStep(signal);
        p = writer.progress;
        if (runsNoMore(p)) return;
      }
      if (signal.aborted) {
        if (isShutdown(signal)) return;
        const timedOut = signal.reason instanceof FailureError && signal.reason.kind === 'timeout';
        await this.end(
          writer,
          timedOut
            ? { stop_reason: 'timeout', detail: describeStop('timeout', signal.reason.message) }
            : CANCELLED,
          null,
        );
        continue;
      }
      if (p.directive && !p.roundClosed) {
        await this.execute(writer, signal);
        continue;
      }
      if (p.round === 0) {
        const check = this.deps.permissions.checkTaskInput(p.input);
        if (check.verdict === 'hard_stop') {
          await this.end(
            writer,
            { stop_reason: 'permission_denied', detail: `${INPUT_REFUSED}${check.reason}` },
            null,
          );
          continue;
        }
      }
      // the safe point between rounds: what others appended meanwhile (an interrupt) is folded in first
      if (await writer.catchUp()) continue;
      await this.startRound(writer, signal);
    }
  }

  /** Guards, context, routing: ends with ROUTER_DECIDED or the task's end. */
  private async startRound(writer: TaskWriter, signal: AbortSignal): Promise<void> {
    const p = writer.progress;
    // round policy: an outcome that follows from the recorded facts is answered by the runtime, not asked of the model
    const settled = deterministicEnd(p, writer.fold.facts);
    if (settled) return this.end(writer, settled.stop, settled.answer, 'runtime');
    // A round whose context was built but not decided (a restart in between) is done again.
    const round = p.round > 0 && p.directive === null && !p.roundClosed ? p.round : p.round + 1;
    const maxRounds = Math.min(p.budgets.max_rounds ?? this.deps.maxRounds, this.deps.maxRounds);
    if (round > maxRounds)
      return this.end(
        writer,
        { stop_reason: 'budget_exceeded', detail: `reached the maximum of ${maxRounds} rounds` },
        null,
      );
    for (const guard of this.deps.guards) {
      const verdict =
        (await guard.beforeRound?.({ progress: p, events: writer.log, fold: writer.fold, round })) ?? {};
      if (verdict.events?.length) await writer.append(verdict.events);
      if (verdict.stop) return this.end(writer, verdict.stop, null);
    }
    // after the guards, which judge the round by the log's times rather than by a timer that fires meanwhile
    await letTheLoopTurn(p);
    const toolCalling = this.deps.router.speaksToolCalls();
    // a delegated agent is shown only the tools its profile allows, never a tool whose budget is spent;
    // the round policy narrows them to the round's surface
    const agentTools = withinBudgets(p, toolsForAgent(this.deps.tools.list(), p.agent));
    const decided = decideSurface(p, agentTools, writer.fold.facts);
    // the client's own tools (AG-UI frontend tools) join every surface that offers tools: they change nothing here
    const clientTools = clientToolManifests(p);
    const surface =
      decided && decided.surface !== 'answer_only'
        ? { ...decided, tools: [...decided.tools, ...clientTools] }
        : decided;
    const tools = surface ? surface.tools : [...agentTools, ...clientTools];
    const shape = {
      toolCalling,
      answerOnly: surface?.surface === 'answer_only',
      session: sessionPressureOf(p.session_budget, p.usage),
    };
    let ctx = await this.deps.context.build(p, round, tools, signal, {
      canCompact: this.deps.router.canCompact(),
      ...shape,
    });
    if (ctx.compaction) {
      // Summarised, the old rounds shrink to one item; if the summary failed they are trimmed instead.
      await this.deps.router.compact(writer, round, ctx.compaction, signal);
      ctx = await this.deps.context.build(writer.progress, round, tools, signal, {
        ...shape,
        canCompact: false,
        // the summary's model call is the session's spend too
        session: sessionPressureOf(writer.progress.session_budget, writer.progress.usage),
      });
    }
    if (ctx.overBudget)
      return this.end(
        writer,
        { stop_reason: 'budget_exceeded', detail: describeStop('budget_exceeded', ctx.overBudget) },
        null,
      );
    // The round's first commit is the router's (MODEL_CALLED, or its decision): the context rides in it. A crash
    // before then loses nothing a resume needs, since a round with no decision is built again.
    const event = surface
      ? {
          ...ctx.event,
          tool_surface: {
            surface: surface.surface,
            reason: surface.reason,
            tools: surface.tools.map((t) => t.name),
          },
        }
      : ctx.event;
    writer.defer([{ type: 'CONTEXT_BUILT', payload: event }]);
    const decision = await this.deps.router.decide(writer, round, ctx, signal).catch((err: unknown) => {
      if (signal.aborted) return null;
      throw err;
    });
    if (!decision) return;
    if (decision.kind === 'stop') return this.end(writer, decision.stop, decision.result ?? null);
    // Reminded (GUARD_TRIGGERED closed the round): the next round asks again.
    if (decision.kind === 'no_directive') return;
    // follows from the reply by computation alone: it rides with whatever the directive does first
    writer.defer([
      {
        type: 'ROUTER_DECIDED',
        payload: {
          round,
          directive: decision.directive,
          source: decision.source,
          fallback_reason: decision.fallback_reason,
          attempts: decision.attempts,
          ...(decision.tool_calls ? { tool_calls: decision.tool_calls } : {}),
        },
      },
    ]);
  }

  private async execute(writer: TaskWriter, signal: AbortSignal): Promise<void> {
    const p = writer.progress;
    const out = await this.deps.engine.execute(writer, p.directive!, p.round, signal);
    if (out.kind === 'end') {
      // the model's answer is judged before the task ends with it; one that falls short is asked for once more
      if (
        this.deps.evaluation &&
        p.directive!.type === 'respond' &&
        out.stop.stop_reason === 'completed' &&
        out.result !== null &&
        ((await this.deps.evaluation.judge(writer, out.result, signal)) === 'retry' || signal.aborted)
      )
        return;
      await this.end(writer, out.stop, out.result);
    }
    const now = writer.progress;
    if (out.kind === 'suspend' && !signal.aborted && !SUSPENDED_STATUSES.includes(now.status)) {
      throw new Error(`task ${now.task_id}: execution suspended with nothing to wait for`);
    }
  }

  /**
   * The one place a task ends: guards may record evidence and change the stop; then the final event with usage.
   * `author`: who wrote `result` (the runtime, from recorded facts, or the model).
   */
  async end(
    writer: TaskWriter,
    stop: Stop,
    result: string | null,
    author: 'model' | 'runtime' = 'model',
  ): Promise<void> {
    // the guards and the usage of the final event see every event of the task (a deferred one is folded too)
    let final = stop;
    // the last guard's events ride in the final event's commit; an earlier guard's are appended before the
    // next guard runs, so that one sees them in the log
    let closing: readonly NewEvent[] = [];
    for (const guard of this.deps.guards) {
      if (closing.length) await writer.append(closing);
      closing = [];
      const verdict =
        (await guard.beforeEnd?.({
          progress: writer.progress,
          events: writer.log,
          fold: writer.fold,
          round: writer.progress.round,
          stop: final,
          result,
        })) ?? {};
      if (verdict.events?.length) closing = verdict.events;
      if (verdict.stop) final = verdict.stop;
    }
    if (closing.some((e) => !UNMETERED_CLOSING_TYPES.has(e.type))) await writer.append(closing);
    else writer.defer(closing);
    const usage = structuredClone(writer.progress.usage);
    // round policy: where the outcome follows from recorded facts the runtime writes the answer, and says who wrote it
    const policy = isRoundPolicyOn(writer.progress);
    const own = policy ? runtimeAnswer(writer.progress, final) : null;
    if (own !== null) result = own;
    const runtimeWrote = own !== null || author === 'runtime';
    const source =
      policy && result !== null
        ? { answer_source: runtimeWrote ? ('runtime' as const) : ('model' as const) }
        : {};
    if (final.stop_reason === 'completed') {
      await writer.append([
        {
          type: 'TASK_COMPLETED',
          payload: { stop_reason: 'completed', detail: final.detail, usage, result: result ?? '', ...source },
        },
      ]);
    } else if (final.stop_reason === 'cancelled' || final.stop_reason === 'interrupted') {
      await writer.append([
        { type: 'TASK_CANCELLED', payload: { stop_reason: final.stop_reason, detail: final.detail, usage } },
      ]);
    } else {
      await writer.append([
        {
          type: 'TASK_FAILED',
          payload: { stop_reason: final.stop_reason, detail: final.detail, usage, result, ...source },
        },
      ]);
    }
  }
}
