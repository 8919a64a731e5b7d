import { z } from 'zod';

export const PERMISSION_DECISIONS = ['allow_once', 'allow_always', 'deny', 'ask_always'] as const;
export const PermissionDecision = z.enum(PERMISSION_DECISIONS);
export type PermissionDecision = z.infer<typeof PermissionDecision>;

/**
 * The rule of a TASK_AWAITING_PERMISSION that is an MCP server's form, not a call's permission: it is
 * answered allow_once with the form's `content`, or deny.
 */
export const MCP_ELICITATION_RULE = 'mcp_elicitation';

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

const isRegExp = (source: string): boolean => {
  try {
    new RegExp(source);
    return true;
  } catch {
    return false;
  }
};

/**
 * Configurable permission rules (RUNLEDGER_PERMISSION_RULES, JSON), added to the built-in defaults.
 * Programs are matched by basename; patterns are regular expressions on the raw command.
 */
export const PermissionRulesConfig = z
  .object({
    hard_stop_programs: z.array(z.string().min(1)).default([]),
    deny_programs: z.array(z.string().min(1)).default([]),
    prompt_programs: z.array(z.string().min(1)).default([]),
    /** read-only programs, allowed when every path they name is inside the allowed root */
    allow_programs: z.array(z.string().min(1)).default([]),
    patterns: z
      .array(
        z.object({
          rule: z.string().min(1),
          pattern: z.string().min(1).refine(isRegExp, 'not a valid regular expression'),
          verdict: PermissionVerdict,
          reason: z.string().default('matched a configured pattern'),
        }),
      )
      .default([]),
    /** writes at or below these paths are a hard stop */
    protected_paths: z.array(z.string().startsWith('/')).default([]),
    /** file_write inside the allowed root asks first (default) or runs */
    prompt_file_writes: z.boolean().default(true),
    /**
     * MCP tools (`mcp__<server>__<tool>`) ask first unless allowed here by server (`github`) or by
     * tool (`github__search_issues`)
     */
    mcp_allow: z.array(z.string().min(1)).default([]),
    /** MCP servers or tools never called (same forms as mcp_allow); wins over every allow */
    mcp_deny: z.array(z.string().min(1)).default([]),
    /** MCP tools their server annotates readOnlyHint run without asking */
    mcp_allow_read_only: z.boolean().default(false),
  })
  .strict();
export type PermissionRulesConfig = z.infer<typeof PermissionRulesConfig>;
