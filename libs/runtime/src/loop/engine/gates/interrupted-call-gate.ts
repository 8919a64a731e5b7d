import { ALLOW, GateCall, GateVerdict, ToolGate } from './tool-gate';

const UNKNOWN_OUTCOME =
  'the process stopped while this call ran; its outcome is unknown and it was not run again';

/**
 * A call whose intent was recorded before a restart, without an outcome, runs
 * again only when its manifest declares it idempotent; otherwise it fails as
 * outcome_unknown and the orchestrator decides. An attempt that stopped because its server asked
 * the user for input (the server was told the question was cancelled) is issued again.
 */
export class InterruptedCallGate implements ToolGate {
  check({ prior, tool }: GateCall): GateVerdict {
    if (!prior || tool.manifest.idempotent || prior.awaiting_input) return ALLOW;
    return {
      kind: 'deny',
      error: UNKNOWN_OUTCOME,
      error_kind: 'outcome_unknown',
      step_error: UNKNOWN_OUTCOME,
    };
  }
}
