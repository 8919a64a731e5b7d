/** The prefix of every MCP tool's name in the registry: `mcp__<server>__<tool>`. */
export const MCP_TOOL_PREFIX = 'mcp__';

export const isMcpToolName = (name: string): boolean => name.startsWith(MCP_TOOL_PREFIX);

export const mcpToolName = (server: string, tool: string): string => `${MCP_TOOL_PREFIX}${server}__${tool}`;

/** Server names never contain `__`, so the first `__` after the prefix ends the server's name. */
export function splitMcpToolName(name: string): { server: string; tool: string } {
  const rest = name.slice(MCP_TOOL_PREFIX.length);
  const at = rest.indexOf('__');
  return at === -1 ? { server: rest, tool: '' } : { server: rest.slice(0, at), tool: rest.slice(at + 2) };
}
