import { isCircuitOpen } from '../../../discipline/failure-policy';
import { ALLOW, GateCall, GateVerdict, ToolGate } from './tool-gate';

/** A tool that failed `threshold` times in a row in this task is not run again; the call fails as tool_error. */
export class CircuitBreakerGate implements ToolGate {
  constructor(private readonly threshold: number) {}

  check({ spec, fold }: GateCall): GateVerdict {
    if (!isCircuitOpen(fold.toolGuard, spec.tool, this.threshold)) return ALLOW;
    const error = `circuit open: ${spec.tool} failed ${this.threshold} times in a row in this task; not run`;
    return { kind: 'deny', error, error_kind: 'tool_error', step_error: error };
  }
}
