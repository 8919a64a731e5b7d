import { McpClientManager } from '@runledger/tools';

/** One configured server as `runledger mcp list` shows it. */
export interface McpServerListing {
  name: string;
  transport: 'stdio' | 'http';
  state: string;
  error: string | null;
  /** 2026-07-28 or 2025-11-25; null while it is not connected */
  protocol_version: string | null;
  tools: { name: string; description: string; read_only: boolean; idempotent: boolean }[];
}

export function mcpListing(manager: McpClientManager): McpServerListing[] {
  return manager.status().map((s) => ({
    name: s.name,
    transport: s.transport,
    state: s.state,
    error: s.error,
    protocol_version: s.protocol_version,
    tools: s.tools.flatMap((name) => {
      const manifest = manager.get(name)?.entry.manifest;
      return manifest
        ? [
            {
              name,
              description: manifest.description,
              read_only: manifest.read_only === true,
              idempotent: manifest.idempotent,
            },
          ]
        : [];
    }),
  }));
}

/** The listing as text: a line per server (name, transport, state, tool count or why it is down), a line per tool. */
export function mcpListingText(servers: readonly McpServerListing[]): string {
  if (servers.length === 0) return 'no MCP servers configured (RUNLEDGER_MCP_SERVERS)';
  const lines: string[] = [];
  for (const s of servers) {
    const detail = s.state === 'ready' ? `${s.tools.length} tool(s)` : (s.error ?? '');
    lines.push(`${s.name}  ${s.transport}  ${s.state}  ${detail}`.trimEnd());
    for (const t of s.tools) {
      const hints = [t.read_only ? 'read-only' : '', t.idempotent ? 'idempotent' : ''].filter(Boolean);
      const summary = t.description.split('\n')[0];
      lines.push(`  ${t.name}${hints.length ? ` [${hints.join(', ')}]` : ''}  ${summary}`);
    }
  }
  return lines.join('\n');
}
