import { NewEvent } from '@runledger/contracts';
import { Stop } from '../../ports';
import { GuardVerdict, LoopGuard, RoundGuardContext } from './loop-guard';
import { judgeFacts } from '../../discipline/accept-gate';
import { activeMs, admit, firstExceeded, resolveBudgets } from '../../discipline/budgets';
import { REPEAT_REMINDER } from '../../discipline/repeat-detector';
import { guardEvent } from '../../discipline/retry-runner';
import { isCircuitOpen } from '../../discipline/failure-policy';
import { DisciplineSettings, ResolvedBudgets } from '../../discipline/settings';
import { sessionExceeded } from '../../discipline/session-budget';
import { describeStop } from '../../discipline/stop-reasons';
import { WorkspaceView } from '../../discipline/workspace-view';
import { judgeTodos } from '../../discipline/todos';

/**
 * The run-discipline guards as the loop's LoopGuard: before each round the
 * budgets, the repeat-cycle detector and the tool circuit breakers; before the
 * end the accept gate. Every decision is computed from the task's log (its
 * fold, kept by the task's writer), so a resumed task is judged exactly as it
 * would have been without the restart.
 */
export class DisciplineGuard implements LoopGuard {
  constructor(
    private readonly settings: DisciplineSettings,
    private readonly now: () => Date = () => new Date(),
    /** where the accept gate looks when the log does not settle a file check; none: the log only */
    private readonly workspace: WorkspaceView | null = null,
  ) {}

  budgetsFor(ctx: Pick<RoundGuardContext, 'progress'>): ResolvedBudgets {
    return resolveBudgets(ctx.progress.budgets, this.settings.budgetDefaults, this.settings.budgetMaximums)
      .budgets;
  }

  async beforeRound(ctx: RoundGuardContext): Promise<GuardVerdict> {
    const stop = this.budgetStop(ctx) ?? null;
    if (stop) return { stop };
    const events: NewEvent[] = [];

    const { verdict: repeat, last } = ctx.fold.repeatBefore(ctx.round, this.settings.repeatThreshold);
    if (repeat.action === 'stop')
      return { stop: { stop_reason: 'repeat_cycle', detail: describeStop('repeat_cycle', repeat.detail) } };
    if (repeat.action === 'remind' && last && !ctx.fold.guarded('repeat_reminder', last.round)) {
      events.push(
        guardEvent('repeat_reminder', last.round, `${repeat.detail}. ${REPEAT_REMINDER}`, {
          streak: repeat.state.streak,
        }),
      );
    }

    // Circuit breakers: tell the orchestrator once; a call to the broken tool after that (refused
    // by the engine, or failing again) ends the task.
    const health = ctx.fold.toolGuard;
    for (const tool of Object.keys(health.consecutiveFailures)) {
      if (!isCircuitOpen(health, tool, this.settings.circuitBreakerThreshold)) continue;
      const failedSinceTold = ctx.fold.circuitFailedSinceTold(tool);
      if (failedSinceTold === null) {
        events.push(
          guardEvent(
            'circuit_breaker',
            last?.round ?? null,
            `${tool} failed ${health.consecutiveFailures[tool]} times in a row; do not call it again in this task`,
            { tool },
          ),
        );
      } else if (failedSinceTold) {
        return {
          events,
          stop: {
            stop_reason: 'tool_error',
            detail: describeStop(
              'tool_error',
              `${tool} was called again after failing ${this.settings.circuitBreakerThreshold} times in a row`,
            ),
          },
        };
      }
    }
    return { events };
  }

  async beforeEnd(
    ctx: RoundGuardContext & { stop: Stop; result: string | null },
  ): Promise<{ events?: NewEvent[]; stop?: Stop }> {
    return acceptAtEnd(ctx, this.workspace);
  }

  remainingMs(ctx: Pick<RoundGuardContext, 'progress' | 'fold'>): number | null {
    return this.budgetsFor(ctx).timeout_ms - activeMs(ctx.fold.meter(), this.now());
  }

  /** A budget already overrun, or one that would be by starting another round. */
  private budgetStop(ctx: RoundGuardContext): Stop | null {
    const budgets = this.budgetsFor(ctx);
    const meter = ctx.fold.meter(this.settings.charsPerToken);
    const elapsed = activeMs(meter, this.now());
    const over =
      firstExceeded(meter.usage, budgets, elapsed) ??
      admit(meter.usage, budgets, { kind: 'round' }) ??
      sessionExceeded(ctx.progress.session_budget, meter.usage, 'round');
    if (!over) return null;
    if (over.budget === 'timeout_ms')
      return { stop_reason: 'timeout', detail: describeStop('timeout', over.detail) };
    return { stop_reason: 'budget_exceeded', detail: describeStop('budget_exceeded', over.detail) };
  }
}

/**
 * The accept gate at a completed end: the task's accept checks and its active todos (todos_done),
 * judged from the log; ACCEPTANCE_DECIDED, and accept_check_failed naming the first required
 * result that failed. Nothing to decide without checks or active todos.
 */
export function acceptAtEnd(
  ctx: Pick<RoundGuardContext, 'progress' | 'fold'> & { stop: Stop; result: string | null },
  workspace: WorkspaceView | null,
  checks = ctx.progress.accept_checks,
): { events?: NewEvent[]; stop?: Stop } {
  if (ctx.stop.stop_reason !== 'completed') return {};
  const todos = ctx.progress.todos;
  if (checks.length === 0 && judgeTodos(todos, null) === null) return {};
  const decision = judgeFacts(checks, ctx.fold.facts.facts(), ctx.result, workspace, todos);
  const events: NewEvent[] = [
    { type: 'ACCEPTANCE_DECIDED', payload: { passed: decision.passed, results: decision.results } },
  ];
  if (!decision.failing) return { events };
  return {
    events,
    stop: {
      stop_reason: 'accept_check_failed',
      detail: describeStop(
        'accept_check_failed',
        `check ${decision.failing.id} (${decision.failing.kind}): ${decision.failing.detail}`,
      ),
    },
  };
}
