import { PermissionCheck, ToolManifest } from '@runledger/contracts';
import { describeAllowAlways } from './allow-always-scope';

export interface PermissionSubject {
  manifest: ToolManifest;
  args: Record<string, unknown>;
  session_id: string;
}

/**
 * Rule check before a tool call runs: allow | prompt | deny | hard_stop.
 * Pure with respect to the log: remembered allow_always decisions are applied
 * by the runtime from PERMISSION_RESOLVED events, not stored here.
 */
export abstract class PermissionService {
  abstract check(subject: PermissionSubject): PermissionCheck;
  /** Hard-stop check on a task's raw input, before anything runs (e.g. a request to wipe `/`). */
  abstract checkTaskInput(input: string): PermissionCheck;
  /**
   * Secrets this call needs beyond its manifest's `secrets` (e.g. `sudo_password`
   * for a shell command that uses sudo). The runtime asks the user for each one
   * (TASK_AWAITING_SECRET) before the call runs.
   */
  abstract requiredSecrets(subject: PermissionSubject): string[];
  /**
   * What an allow_always answer to a prompt from `rule` would cover, in words, shown before the
   * person answers (the runtime remembers it for the session, tool and rule).
   */
  allowAlwaysCovers(tool: string, rule: string | null): string {
    return describeAllowAlways(tool, rule);
  }
}
