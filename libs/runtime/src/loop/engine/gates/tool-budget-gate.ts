import { OVER_BUDGET, spentBudget } from '../../tool-budgets';
import { ALLOW, GateCall, GateVerdict, ToolGate } from './tool-gate';

/**
 * Per-tool budgets before dispatch: a call past its tool's budget is refused without running and
 * the model is told why (its correction; the tool is no longer offered). A task that calls past a
 * budget again ends with budget_exceeded.
 */
export class ToolBudgetGate implements ToolGate {
  check({ spec, progress }: GateCall): GateVerdict {
    const spent = spentBudget(progress, spec.tool, spec.call_id);
    if (spent === null) return ALLOW;
    const refusal = `${OVER_BUDGET}: ${spent}`;
    const earlier = [...progress.calls.values()].some(
      (c) => c.call_id !== spec.call_id && (c.error ?? '').startsWith(OVER_BUDGET),
    );
    if (earlier)
      return { kind: 'hard_stop', reason: refusal, stop_reason: 'budget_exceeded', recordFailure: true };
    return {
      kind: 'deny',
      error: refusal,
      error_kind: 'permission_denied',
      step_error: `${refusal}. ${spec.tool} is no longer offered; another call past a tool's budget ends the task.`,
    };
  }
}
