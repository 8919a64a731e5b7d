import { newId } from '@runledger/contracts';
import { PermissionService } from '@runledger/permissions';
import { AllowAlwaysGrants } from '../allow-always-grants';
import { ALLOW, GateCall, GateVerdict, ToolGate } from './tool-gate';

/**
 * The permission policy's verdict on the call. A prompt (or a step that asks
 * for confirmation) is answered by the user's decision for this very call and
 * arguments, by an allow_always of the session, or else by asking: the task
 * waits on TASK_AWAITING_PERMISSION.
 */
export class PermissionGate implements ToolGate {
  constructor(
    private readonly permissions: PermissionService,
    private readonly grants: AllowAlwaysGrants,
  ) {}

  async check({ spec, tool, args_hash, progress }: GateCall): Promise<GateVerdict> {
    const check = this.permissions.check({
      manifest: tool.manifest,
      args: spec.args,
      session_id: progress.session_id,
    });
    if (check.verdict === 'hard_stop')
      return {
        kind: 'hard_stop',
        reason: check.reason,
        stop_reason: 'permission_denied',
        recordFailure: true,
      };
    if (check.verdict === 'deny') return denied(check.reason);
    if (check.verdict !== 'prompt' && !spec.requiresConfirmation) return ALLOW;
    // A decision counts only for the call it was made for, with the same arguments.
    const decided = progress.permissionDecisions.get(spec.call_id);
    if (decided && decided.args_hash === args_hash)
      return decided.decision === 'deny' ? denied('denied by the user') : ALLOW;
    const pending = progress.pendingPermission;
    if (pending?.call_id === spec.call_id && pending.args_hash === args_hash)
      return { kind: 'suspend', events: [] };
    if (await this.grants.isAllowed(progress.session_id, spec.tool, check.rule)) return ALLOW;
    return {
      kind: 'suspend',
      events: [
        {
          type: 'TASK_AWAITING_PERMISSION',
          payload: {
            request_id: newId('perm'),
            call_id: spec.call_id,
            tool: spec.tool,
            args: spec.args,
            args_hash,
            rule: check.rule,
            reason: check.reason,
            covers: this.permissions.allowAlwaysCovers(spec.tool, check.rule),
          },
        },
      ],
    };
  }
}

const denied = (reason: string): GateVerdict => ({
  kind: 'deny',
  error: reason,
  error_kind: 'permission_denied',
  step_error: `permission denied: ${reason}`,
});
