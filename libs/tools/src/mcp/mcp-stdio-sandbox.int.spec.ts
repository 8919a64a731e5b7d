import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ToolSandbox } from '../sandbox';
import type { ToolExecutionContext } from '../tool-registry';
import { McpClientManager } from './mcp-client-manager';
import type { McpServerConfig } from './mcp-config';
import { visibleFolders } from './mcp-server-connection';

const EVERYTHING = realpathSync(
  resolve(__dirname, '../../../../node_modules/@modelcontextprotocol/server-everything/dist/index.js'),
);
const EVERYTHING_MODULES = EVERYTHING.slice(0, EVERYTHING.indexOf('/node_modules/') + '/node_modules'.length);
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

/**
 * A stdio MCP server with no dependencies, in a package of its own: bin/server.js loads
 * ../lib/files.js, so only the package (not the script's folder alone) lets it start. Its one
 * tool reads a file by absolute path, to show what the child can see.
 */
function writeReaderPackage(dir: string): string {
  mkdirSync(join(dir, 'bin'), { recursive: true });
  mkdirSync(join(dir, 'lib'), { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'reader', type: 'commonjs' }));
  writeFileSync(
    join(dir, 'lib/files.js'),
    `const fs = require('node:fs');
exports.read = (p) => { try { return fs.readFileSync(p, 'utf8'); } catch (e) { return 'unreadable: ' + e.code; } };`,
  );
  writeFileSync(
    join(dir, 'bin/server.js'),
    `const { read } = require('../lib/files.js');
const send = (m) => process.stdout.write(JSON.stringify(m) + '\\n');
let buffered = '';
process.stdin.on('data', (chunk) => {
  buffered += chunk;
  for (let nl; (nl = buffered.indexOf('\\n')) !== -1; ) {
    const m = JSON.parse(buffered.slice(0, nl));
    buffered = buffered.slice(nl + 1);
    if (m.id === undefined) continue;
    if (m.method === 'initialize')
      send({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'reader', version: '1.0.0' } } });
    else if (m.method === 'tools/list')
      send({ jsonrpc: '2.0', id: m.id, result: { tools: [{ name: 'read', inputSchema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } }] } });
    else if (m.method === 'tools/call')
      send({ jsonrpc: '2.0', id: m.id, result: { content: [{ type: 'text', text: read(m.params.arguments.path) }] } });
    else send({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'no such method' } });
  }
});`,
  );
  return join(dir, 'bin/server.js');
}

describe('stdio MCP servers started as `node <absolute script>` under bubblewrap', () => {
  let dir: string;
  let manager: McpClientManager | null = null;
  beforeEach(() => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'rl-mcp-paths-')));
  });
  afterEach(async () => {
    await manager?.close();
    manager = null;
    rmSync(dir, { recursive: true, force: true });
  });

  const start = async (servers: McpServerConfig[], privateFolders: string[] = []) => {
    const sandbox = new ToolSandbox({ allowedRoot: join(dir, 'root'), mode: 'bwrap', logger: quiet });
    expect(sandbox.sandboxStatus().effective).toBe('bwrap');
    manager = new McpClientManager({
      servers,
      sandbox,
      blobDir: join(dir, 'blobs'),
      privateFolders,
      env: {},
      logger: quiet,
      startTimeoutMs: 20_000,
      backoffMs: 60_000,
    });
    await manager.start();
    return manager;
  };
  const call = async (m: McpClientManager, name: string, args: Record<string, unknown>) => {
    const tool = m.get(name);
    if (!tool) throw new Error(`${name} is not listed: ${JSON.stringify(m.status())}`);
    const ctx: ToolExecutionContext = {
      task_id: 'tsk_1',
      session_id: 'ses_1',
      step_id: null,
      call_id: 'call_1',
      signal: new AbortController().signal,
      secrets: new Map(),
    };
    return tool.server.call(tool.entry, args, ctx);
  };
  const stdio = (name: string, args: string[]): McpServerConfig => ({
    name,
    command: 'node',
    args,
    env_from: {},
    network: false,
    timeout_ms: 20_000,
  });

  it('starts server-everything from its node_modules by path, and a script whose package is outside the root', async () => {
    const reader = writeReaderPackage(join(dir, 'tools/reader'));
    writeFileSync(join(dir, 'tools/reader/notes.txt'), 'beside the script');
    const m = await start([stdio('everything', [EVERYTHING, 'stdio']), stdio('reader', [reader])]);
    expect(m.status().map((s) => [s.name, s.state, s.error])).toEqual([
      ['everything', 'ready', null],
      ['reader', 'ready', null],
    ]);
    const echoed = await call(m, 'mcp__everything__echo', { message: 'through bwrap' });
    expect(JSON.stringify(echoed)).toContain('Echo: through bwrap');
    const read = await call(m, 'mcp__reader__read', { path: join(dir, 'tools/reader/notes.txt') });
    expect(JSON.stringify(read)).toContain('beside the script');
    // what no argument names stays out of sight
    writeFileSync(join(dir, 'elsewhere.txt'), 'not named');
    expect(
      JSON.stringify(await call(m, 'mcp__reader__read', { path: join(dir, 'elsewhere.txt') })),
    ).toContain('unreadable: ENOENT');
  }, 60_000);

  it('never shows the data folder: not when an argument names it, not inside a package that holds it', async () => {
    const project = join(dir, 'project');
    const reader = writeReaderPackage(project);
    const data = join(project, 'data');
    mkdirSync(data);
    writeFileSync(join(data, 'secrets.key'), 'the service key');
    const inData = writeReaderPackage(join(data, 'plugin'));
    const m = await start([stdio('reader', [reader, data]), stdio('hidden', [inData])], [data]);
    const [visible, hidden] = m.status();
    expect([visible.state, hidden.state]).toEqual(['ready', 'failed']);
    expect(hidden.error).toMatch(/Cannot find module .*plugin\/bin\/server\.js/);
    expect(JSON.stringify(await call(m, 'mcp__reader__read', { path: join(data, 'secrets.key') }))).toContain(
      'unreadable: ENOENT',
    );
    expect(
      JSON.stringify(await call(m, 'mcp__reader__read', { path: join(project, 'package.json') })),
    ).toContain('reader');
  }, 60_000);

  it('names the folders to show: packages of scripts and named folders, minus the root, /usr and the data folder', () => {
    const root = join(dir, 'root');
    mkdirSync(root);
    const reader = writeReaderPackage(join(dir, 'pkg'));
    mkdirSync(join(dir, 'pkg/data'));
    mkdirSync(join(dir, 'pkg/node_modules'));
    expect(
      visibleFolders(
        '/usr/bin/node',
        [EVERYTHING, 'stdio', `--config=${reader}`, root, '/no/such/file'],
        root,
        root,
      ),
    ).toEqual({ readOnly: [EVERYTHING_MODULES, join(dir, 'pkg')], hidden: [] });
    // the data folder is the project folder: its node_modules only
    expect(
      visibleFolders('/usr/bin/node', [reader, join(dir, 'pkg/node_modules')], root, root, [
        join(dir, 'pkg'),
      ]),
    ).toEqual({ readOnly: [join(dir, 'pkg/node_modules')], hidden: [] });
    expect(visibleFolders('/usr/bin/node', [reader], root, root, [join(dir, 'pkg/data')])).toEqual({
      readOnly: [join(dir, 'pkg')],
      hidden: [join(dir, 'pkg/data')],
    });
  });
});
