import { elicitedCall } from '../../../log/progress';
import { ALLOW, GateCall, GateVerdict, ToolGate } from './tool-gate';

/**
 * A call whose server's question to the user is still unanswered waits for the answer: issuing it
 * again would only ask the same question twice.
 */
export class ElicitationGate implements ToolGate {
  check({ spec, progress }: GateCall): GateVerdict {
    const pending = [progress.pendingPermission?.call_id, progress.pendingSecret?.call_id];
    return pending.some((id) => id !== undefined && elicitedCall(id) === spec.call_id)
      ? { kind: 'suspend', events: [] }
      : ALLOW;
  }
}
