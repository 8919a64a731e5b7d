import { PermissionCheck } from '@runledger/contracts';

/**
 * The prompts a blanket yes (`runledger run --yes`) may answer only while an OS sandbox (bubblewrap)
 * confines the command: what they ask about reaches past what the parser can keep inside the allowed
 * root. A read outside it (other processes' data in /proc included), a path only the running shell
 * settles, code the parser cannot see into (an unknown program, an interpreter, a sed or awk script that
 * runs commands, git hooks and configs, a preloaded library), the network, root rights. Without the
 * sandbox they stay refused unless the permission rules name them; a person asked one by one may still
 * allow each.
 */
export const OS_SANDBOX_RULES: ReadonlySet<string> = new Set([
  'read_outside_root',
  'read_dynamic_path',
  'write_dynamic_path',
  'unknown_program',
  'dynamic_command',
  'unparsed_shell',
  'dangerous_env',
  'network_program',
  'sudo',
  'disk_tool',
  'awk_side_effects',
  'sed_side_effects',
  'git_config',
  'git_write',
]);

/** The rule of a prompt is one whose yes only an OS sandbox makes safe (see OS_SANDBOX_RULES). */
export const needsOsSandbox = (rule: string | null | undefined): boolean =>
  rule !== null && rule !== undefined && OS_SANDBOX_RULES.has(rule);

/** `check` asks about something only an OS sandbox keeps inside the allowed root. */
export const promptNeedsOsSandbox = (check: PermissionCheck): boolean =>
  check.verdict === 'prompt' && needsOsSandbox(check.rule);
