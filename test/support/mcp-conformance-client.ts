import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ToolSandbox } from '../../libs/tools/src/sandbox';
import { McpServerConfig } from '../../libs/tools/src/mcp/mcp-config';
import { McpServerConnection } from '../../libs/tools/src/mcp/mcp-server-connection';
import { McpBlobStore } from '../../libs/tools/src/mcp/mcp-results';

/**
 * Runledger's MCP client as the conformance suite's client scenarios drive one: connect to the
 * suite's server (server/discover, then 2026-07-28 or the 2025-11-25 handshake, and tools/list, as
 * a configured HTTP server is started), then what the scenario asks. A question the server asks
 * during a call is answered as a person accepting the form as offered, the way the runtime answers
 * it from the log. Exit code 0 when the scenario's part went through.
 */
export async function main(url: string | undefined, scenario: string): Promise<number> {
  if (!url) throw new Error('usage: mcp-conformance-client.js <server-url>');
  const blobs = mkdtempSync(join(tmpdir(), 'rl-mcp-conformance-'));
  const say = (obj: object, msg: string) => process.stderr.write(`${msg} ${JSON.stringify(obj)}\n`);
  const connection = new McpServerConnection(McpServerConfig.parse({ name: 'conformance', url }), {
    // an HTTP server spawns nothing: the sandbox is never asked
    sandbox: null as unknown as ToolSandbox,
    blobs: new McpBlobStore(blobs),
    env: {},
    logger: { warn: say, info: say },
    onToolsChanged: () => undefined,
    startTimeoutMs: 10_000,
  });
  try {
    await connection.start();
    const status = connection.status();
    if (status.state !== 'ready') throw new Error(`not connected: ${status.error}`);
    say({ protocol_version: status.protocol_version, tools: status.tools }, 'connected');
    const call = async (tool: string, args: Record<string, unknown>) => {
      const entry = connection.tools().find((t) => t.remoteName === tool);
      if (!entry) throw new Error(`the server lists no tool ${tool}`);
      const outcome = await connection.call(entry, args, {
        task_id: 'task_conformance',
        session_id: 'sess_conformance',
        step_id: null,
        call_id: 'call_1',
        signal: AbortSignal.timeout(20_000),
        secrets: new Map(),
        elicitationAnswer: () => ({ action: 'accept', content: {} }),
      });
      say({ tool, outcome }, 'called');
    };
    if (scenario === 'tools_call') await call('add_numbers', { a: 5, b: 3 });
    else if (scenario === 'elicitation-sep1034-client-defaults')
      await call('test_client_elicitation_defaults', {});
    else if (scenario === 'sse-retry') await call('test_reconnection', {});
    return 0;
  } finally {
    await connection.close();
    rmSync(blobs, { recursive: true, force: true });
  }
}
