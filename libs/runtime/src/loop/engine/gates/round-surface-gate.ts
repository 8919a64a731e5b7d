import { NOT_OFFERED, isRoundPolicyOn, surfaceRefusal } from '../../round-policy';
import { ALLOW, GateCall, GateVerdict, ToolGate } from './tool-gate';

/**
 * The round policy before dispatch: a call outside its round's surface (a tool not offered, a
 * command that is not read-only under inspection, any tool in an answer_only round) is refused
 * before it runs. The first refusal is the model's correction turn; the next one ends the task
 * with mutation_refused.
 */
export class RoundSurfaceGate implements ToolGate {
  check(call: GateCall): GateVerdict {
    const p = call.progress;
    if (!isRoundPolicyOn(p) || !p.surface) return ALLOW;
    const refusal = surfaceRefusal(p.surface, call.spec.tool, call.spec.args);
    if (refusal === null) return ALLOW;
    const earlier = [...p.calls.values()].some(
      (c) => c.call_id !== call.spec.call_id && (c.error ?? '').startsWith(NOT_OFFERED),
    );
    if (earlier)
      return {
        kind: 'hard_stop',
        reason: refusal,
        stop_reason: 'mutation_refused',
        recordFailure: true,
      };
    return {
      kind: 'deny',
      error: refusal,
      error_kind: 'permission_denied',
      step_error: `${refusal}. Another call outside the round's surface ends the task.`,
    };
  }
}
