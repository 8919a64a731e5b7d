import { ToolRegistry } from '@runledger/tools';
import { ALLOW, GateCall, GateVerdict, ToolGate } from './tool-gate';

/** The arguments must match the tool's schema; a mismatch fails the call as validation_error. */
export class ValidateGate implements ToolGate {
  constructor(private readonly tools: ToolRegistry) {}

  check({ spec }: GateCall): GateVerdict {
    const valid = this.tools.validateArgs(spec.tool, spec.args);
    if (valid.ok) return ALLOW;
    return {
      kind: 'deny',
      error: `invalid args for ${spec.tool}: ${valid.error}`,
      error_kind: 'validation_error',
      step_error: valid.error,
    };
  }
}
