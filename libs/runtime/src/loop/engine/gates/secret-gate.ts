import { newId } from '@runledger/contracts';
import { PermissionService } from '@runledger/permissions';
import { SecretVault } from '../../../ports';
import { ALLOW, GateCall, GateVerdict, ToolGate } from './tool-gate';

/**
 * Every secret the call needs (its manifest's and those the policy asks for,
 * e.g. a sudo password) must be in the vault for this call; the first missing
 * one is asked for once and the task waits on TASK_AWAITING_SECRET.
 */
export class SecretGate implements ToolGate {
  constructor(
    private readonly permissions: PermissionService,
    private readonly vault: SecretVault,
  ) {}

  check({ spec, tool, progress }: GateCall): GateVerdict {
    const subject = { manifest: tool.manifest, args: spec.args, session_id: progress.session_id };
    const needed = new Set([...tool.manifest.secrets, ...this.permissions.requiredSecrets(subject)]);
    const held = this.vault.forCall(progress.task_id, spec.call_id);
    const missing = [...needed].find((name) => !held.has(name));
    if (!missing) return ALLOW;
    const pending = progress.pendingSecret;
    if (pending?.call_id === spec.call_id && pending.secret_name === missing)
      return { kind: 'suspend', events: [] };
    return {
      kind: 'suspend',
      events: [
        {
          type: 'TASK_AWAITING_SECRET',
          payload: {
            request_id: newId('sec'),
            call_id: spec.call_id,
            tool: spec.tool,
            secret_name: missing,
            reason: `${spec.tool} needs ${missing}`,
          },
        },
      ],
    };
  }
}
