import Ajv, { type ValidateFunction } from 'ajv';
import { ClientTool, NewEvent, ToolManifest, canonicalJson, newId } from '@runledger/contracts';
import { RegisteredTool } from '@runledger/tools';
import { TaskProgress } from '../../log/progress';
import { CallSpec } from './call-types';
import { ALLOW, GateCall, GateVerdict, ToolGate } from './gates/tool-gate';

/** What a client tool with no parameters schema takes: an object of anything. */
const ANY_OBJECT = { type: 'object', properties: {} };

/**
 * A tool the client offered, as the model is shown it (name, description, the parameters schema
 * as args_schema). It never runs here: the manifest serves the prompt, the gates and the budgets.
 */
export function clientToolManifest(tool: ClientTool): ToolManifest {
  const schema =
    tool.parameters && typeof tool.parameters === 'object' && !Array.isArray(tool.parameters)
      ? (tool.parameters as Record<string, unknown>)
      : ANY_OBJECT;
  return {
    name: tool.name,
    description: tool.description || `${tool.name} (runs in the client)`,
    args_schema: schema,
    requires_permission: false,
    idempotent: false,
    timeout_ms: 30_000,
    secrets: [],
    sensitive_output: false,
    entry: '',
  };
}

/** The client's tools as the model is offered them, in the order the client listed them. */
export const clientToolManifests = (p: TaskProgress): ToolManifest[] =>
  [...p.clientTools.values()].map(clientToolManifest);

/** The tool a call to a client tool is gated as; running it is the client's part, never this process's. */
export function clientRegisteredTool(tool: ClientTool): RegisteredTool {
  return {
    manifest: clientToolManifest(tool),
    run: () => Promise.reject(new Error(`${tool.name} runs in the client`)),
  };
}

const ajv = new Ajv({ allErrors: true, strict: false, validateFormats: false });
const compiled = new Map<string, ValidateFunction | Error>();

/** Why a parameters schema cannot check arguments, or null when it can (the AG-UI endpoint refuses such a tool). */
export function clientSchemaProblem(tool: ClientTool): string | null {
  const v = validatorOf(clientToolManifest(tool).args_schema);
  return v instanceof Error ? v.message : null;
}

function validatorOf(schema: Record<string, unknown>): ValidateFunction | Error {
  const key = canonicalJson(schema);
  let v = compiled.get(key);
  if (!v) {
    try {
      v = ajv.compile(schema);
    } catch (err) {
      v = err instanceof Error ? err : new Error(String(err));
    }
    compiled.set(key, v);
  }
  return v;
}

/** What is wrong with arguments for a client tool, measured against the schema it offered; null: nothing. */
export function clientArgsProblem(tool: ClientTool, args: Record<string, unknown>): string | null {
  const validate = validatorOf(clientToolManifest(tool).args_schema);
  if (validate instanceof Error || validate(args)) return null;
  return ajv.errorsText(validate.errors, { dataVar: 'args' });
}

/** The arguments must match the parameters schema the client offered; a mismatch fails the call before the client is asked. */
export class ClientArgsGate implements ToolGate {
  check({ spec, progress }: GateCall): GateVerdict {
    const offered = progress.clientTools.get(spec.tool);
    const problem = offered ? clientArgsProblem(offered, spec.args) : null;
    if (problem === null) return ALLOW;
    return {
      kind: 'deny',
      error: `invalid args for ${spec.tool}: ${problem}`,
      error_kind: 'validation_error',
      step_error: problem,
    };
  }
}

/** Whether the client was asked for this call and has not answered yet. */
export const awaitsClient = (p: TaskProgress, callId: string): boolean =>
  [...p.pendingClientTools.values()].some((r) => r.call_id === callId);

/**
 * The call's intent and the request for its result, appended together: the client runs the tool
 * and its answer is recorded as the call's outcome (RuntimeController.provideClientToolResult).
 */
export function clientToolRequest(spec: CallSpec, args_hash: string): NewEvent[] {
  return [
    {
      type: 'TOOL_CALLED',
      payload: {
        call_id: spec.call_id,
        tool: spec.tool,
        args: spec.args,
        args_hash,
        step_id: spec.step_id,
        idempotent: false,
        attempt: 1,
      },
    },
    {
      type: 'TASK_AWAITING_CLIENT_TOOL',
      payload: {
        request_id: newId('ctool'),
        call_id: spec.call_id,
        tool: spec.tool,
        args: spec.args,
        reason: `${spec.tool} runs in the client: the task goes on with its result`,
      },
    },
  ];
}
