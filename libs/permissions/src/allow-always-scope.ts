/**
 * What an allow_always answer lets through without asking again. The runtime
 * remembers it per session, tool and matched rule, so approving `touch aa.txt`
 * (rule write_program) also lets `touch bb.txt` and `cp x y` run: a person has
 * to be told that before answering, not after.
 */
const RULE_SCOPE: Readonly<Record<string, string>> = {
  tool_requires_permission: 'every call, whatever its arguments',
  write_inside_root: 'writes to any file under the allowed root',
  write_dynamic_path: 'writes to paths known only at run time',
  read_dynamic_path: 'reads from paths known only at run time',
  read_outside_root: 'reads outside the allowed root',
  unparsed_shell: 'commands it cannot fully parse',
  dangerous_env: 'commands that set a dangerous environment variable (PATH, LD_*, NODE_OPTIONS, ...)',
  sudo: 'commands run as root through sudo',
  dynamic_command: 'programs known only at run time',
  disk_tool: 'disk tools reading the partition table',
  configured_prompt: 'every program the configuration asks about',
  write_program: 'any command that changes files under the allowed root (touch, cp, mv, sed -i, ...)',
  delete_program: 'any command that deletes files under the allowed root (rm, find -delete, ...)',
  network_program: 'any command that uses the network or installs software',
  git_config: 'git with command-line configuration or an output file',
  git_write: 'any git command that changes the repository or uses the network',
  awk_side_effects: 'awk programs that run commands or write files',
  unknown_program: 'any program that is not known to be read-only',
  mcp_tool: 'every call of this MCP tool, whatever its arguments',
};

/** One line for the person asked, the dashboard and PERMISSION_RESOLVED: tool, rule and scope. */
export function describeAllowAlways(tool: string, rule: string | null): string {
  if (rule === null) return `allow always: ${tool}, calls that ask for confirmation, for this session`;
  const scope = RULE_SCOPE[rule] ?? 'commands matching the configured rule';
  return `allow always: ${tool}, ${scope}, for this session (rule ${rule})`;
}
