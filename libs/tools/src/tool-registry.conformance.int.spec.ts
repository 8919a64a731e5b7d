import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ToolManifest } from '@runledger/contracts';
import { InMemoryToolRegistry } from '@runledger/testing';
import { McpClientManager } from './mcp/mcp-client-manager';
import { McpToolRegistry } from './mcp/mcp-tool-registry';
import { PluginToolRegistry } from './plugin-tool-registry';
import { ToolSandbox } from './sandbox';
import { runToolRegistryConformance } from './testing/tool-registry-conformance';

const manifest = (name: string, arg: string): ToolManifest => ({
  name,
  description: `${name} for the conformance suite`,
  args_schema: {
    type: 'object',
    properties: { [arg]: { type: 'string' } },
    required: [arg],
    additionalProperties: false,
  },
  requires_permission: false,
  idempotent: true,
  timeout_ms: 5_000,
  secrets: [],
  sensitive_output: false,
  entry: 'index.js',
});
const FAILING = { name: 'always_fails', args: { reason: 'on purpose' } };
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

const plugins = () =>
  new PluginToolRegistry([
    {
      manifest: manifest('echo', 'text'),
      implementation: { run: async (args) => ({ ok: true, output: { echoed: args.text } }) },
    },
    {
      manifest: manifest(FAILING.name, 'reason'),
      implementation: {
        run: async (args) => {
          throw new Error(`failed ${String(args.reason)}`);
        },
      },
    },
  ]);

runToolRegistryConformance('in-memory (tests)', async () => ({
  sut: new InMemoryToolRegistry()
    .add(manifest('echo', 'text'), async (args) => ({ echoed: args.text }))
    .add(manifest(FAILING.name, 'reason'), async (args) => {
      throw new Error(`failed ${String(args.reason)}`);
    }),
  echo: { name: 'echo', arg: 'text' },
  failing: FAILING,
}));

runToolRegistryConformance('plugins', async () => ({
  sut: plugins(),
  echo: { name: 'echo', arg: 'text' },
  failing: FAILING,
}));

runToolRegistryConformance('MCP (server-everything over stdio) beside the plugins', async () => {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'rl-tools-conf-')));
  const everything = realpathSync(
    resolve(__dirname, '../../../node_modules/@modelcontextprotocol/server-everything/dist/index.js'),
  );
  const manager = new McpClientManager({
    servers: [
      {
        name: 'everything',
        command: 'node',
        args: [everything, 'stdio'],
        env_from: {},
        network: false,
        timeout_ms: 20_000,
      },
    ],
    sandbox: new ToolSandbox({ allowedRoot: dir, mode: 'process', logger: quiet }),
    blobDir: join(dir, 'blobs'),
    privateFolders: [],
    env: {},
    logger: quiet,
    startTimeoutMs: 20_000,
    backoffMs: 60_000,
  });
  await manager.start();
  return {
    sut: new McpToolRegistry(plugins(), manager),
    echo: { name: 'mcp__everything__echo', arg: 'message' },
    failing: FAILING,
    close: async () => {
      await manager.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
