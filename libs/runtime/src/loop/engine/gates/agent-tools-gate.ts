import { ALLOW, GateCall, GateVerdict, ToolGate } from './tool-gate';

/** A delegated agent may call only the tools its profile allows (all when it names none). */
export class AgentToolsGate implements ToolGate {
  check({ spec, progress }: GateCall): GateVerdict {
    const allowed = progress.agent?.tools;
    if (!allowed || allowed.includes(spec.tool)) return ALLOW;
    const error = `the ${progress.agent!.name} agent may not use ${spec.tool} (its tools: ${allowed.join(', ') || 'none'})`;
    return { kind: 'deny', error, error_kind: 'validation_error', step_error: error };
  }
}
