import { admit, resolveBudgets, spendExceeded } from '../../../discipline/budgets';
import { sessionExceeded } from '../../../discipline/session-budget';
import { DisciplineSettings } from '../../../discipline/settings';
import { describeStop } from '../../../discipline/stop-reasons';
import { ALLOW, GateCall, GateVerdict, ToolGate } from './tool-gate';

/**
 * The task's budgets before a tool runs: the tool-call count, and the tokens
 * and cost the model replies spent so far (the task's, then its session's). A reply that crossed the token or
 * cost budget ends the task here, before any of the tools it asked for runs.
 */
export class BudgetGate implements ToolGate {
  constructor(private readonly settings: DisciplineSettings) {}

  check({ progress, fold }: GateCall): GateVerdict {
    const { budgets } = resolveBudgets(
      progress.budgets,
      this.settings.budgetDefaults,
      this.settings.budgetMaximums,
    );
    // Metered as the round guard meters (its characters per token for replies without reported usage).
    const { usage } = fold.meter(this.settings.charsPerToken);
    const over =
      admit(usage, budgets, { kind: 'tool_call' }) ??
      spendExceeded(usage, budgets) ??
      sessionExceeded(progress.session_budget, usage, 'tool_call');
    if (!over) return ALLOW;
    return {
      kind: 'hard_stop',
      reason: describeStop('budget_exceeded', over.detail),
      stop_reason: 'budget_exceeded',
      recordFailure: false,
    };
  }
}
