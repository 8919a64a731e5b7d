import { z } from 'zod';

export const PERMISSION_DECISIONS = ['allow_once', 'allow_always', 'deny', 'ask_always'] as const;
export const PermissionDecision = z.enum(PERMISSION_DECISIONS);
export type PermissionDecision = z.infer<typeof PermissionDecision>;

/** What a permission rule check says about a tool call before it runs. */
export const PERMISSION_VERDICTS = ['allow', 'prompt', 'deny', 'hard_stop'] as const;
export const PermissionVerdict = z.enum(PERMISSION_VERDICTS);
export type PermissionVerdict = z.infer<typeof PermissionVerdict>;

export interface PermissionCheck {
  verdict: PermissionVerdict;
  /** which rule matched, for the event and the person asked */
  rule: string | null;
  reason: string;
}
