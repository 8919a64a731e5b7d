import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ToolManifest } from '@runledger/contracts';
import { MemoryToolService } from './memory-tool-service';
import { PluginToolRegistry } from './plugin-tool-registry';
import { ToolSandbox } from './sandbox';
import { ToolExecutionContext } from './tool-registry';

const ctx = (over: Partial<ToolExecutionContext> = {}): ToolExecutionContext => ({
  task_id: 'task_1',
  session_id: 'sess_1',
  step_id: null,
  call_id: 'call_1',
  signal: new AbortController().signal,
  secrets: new Map(),
  ...over,
});

const manifest = (over: Partial<ToolManifest> = {}): ToolManifest =>
  ToolManifest.parse({
    name: 'echo_tool',
    description: 'test tool',
    args_schema: {
      type: 'object',
      properties: { text: { type: 'string' } },
      required: ['text'],
      additionalProperties: false,
    },
    ...over,
  });

describe('PluginToolRegistry', () => {
  let dir: string;
  let sandbox: ToolSandbox;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'rl-tools-'));
    sandbox = new ToolSandbox({ allowedRoot: path.join(dir, 'root'), mode: 'process' });
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('loads the six built-in plugins from their folders', () => {
    const sut = PluginToolRegistry.load({ services: { sandbox, memory: null } });
    expect(sut.problems).toEqual([]);
    expect(
      sut
        .list()
        .map((m) => m.name)
        .sort(),
    ).toEqual(['file_read', 'file_write', 'memory_insert', 'memory_list', 'memory_search', 'shell_exec']);
  });

  it('reports a broken plugin and skips it, loading the others', () => {
    const plugins = path.join(dir, 'plugins');
    const mk = (name: string, files: Record<string, string>) => {
      mkdirSync(path.join(plugins, name), { recursive: true });
      for (const [f, c] of Object.entries(files)) writeFileSync(path.join(plugins, name, f), c);
    };
    mk('good', {
      'manifest.json': JSON.stringify({
        name: 'shout',
        description: 'upper-cases',
        args_schema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
      }),
      'index.js':
        'exports.createTool = () => ({ run: async (a) => ({ ok: true, output: a.text.toUpperCase() }) });',
    });
    mk('bad_json', { 'manifest.json': '{ nope', 'index.js': '' });
    mk('bad_manifest', {
      'manifest.json': JSON.stringify({ name: 'Bad Name', description: 'x', args_schema: {} }),
      'index.js': '',
    });
    mk('no_export', {
      'manifest.json': JSON.stringify({ name: 'no_export', description: 'x', args_schema: {} }),
      'index.js': 'exports.other = 1;',
    });
    mk('throws', {
      'manifest.json': JSON.stringify({ name: 'throws_on_load', description: 'x', args_schema: {} }),
      'index.js': 'throw new Error("boom at load")',
    });
    mk('bad_schema', {
      'manifest.json': JSON.stringify({
        name: 'bad_schema',
        description: 'x',
        args_schema: { type: 'no-such-type' },
      }),
      'index.js': 'exports.createTool = () => ({ run: async () => ({ ok: true, output: 1 }) });',
    });
    mk('dup', {
      'manifest.json': JSON.stringify({ name: 'file_read', description: 'x', args_schema: {} }),
      'index.js': 'exports.createTool = () => ({ run: async () => ({ ok: true, output: 1 }) });',
    });
    const warnings: string[] = [];
    const sut = PluginToolRegistry.load({
      services: { sandbox, memory: null },
      pluginDirs: [plugins, path.join(dir, 'missing')],
      logger: { warn: (o) => warnings.push(JSON.stringify(o)) },
    });
    expect(sut.get('shout')).toBeDefined();
    const problemDirs = sut.problems.map((p) => path.basename(p.dir)).sort();
    expect(problemDirs).toEqual(
      ['bad_json', 'bad_manifest', 'bad_schema', 'dup', 'missing', 'no_export', 'throws'].sort(),
    );
    expect(sut.problems.find((p) => p.dir.endsWith('throws'))!.error).toContain('boom at load');
    expect(warnings).toHaveLength(sut.problems.length);
    expect(sut.list()).toHaveLength(7);
  });

  it('validates args with the manifest schema before the tool runs', async () => {
    const run = jest.fn(async () => ({ ok: true, output: 'ran' }));
    const sut = new PluginToolRegistry([{ manifest: manifest(), implementation: { run } }]);
    const bad = await sut.invoke('echo_tool', { text: 3 }, ctx());
    expect(bad).toMatchObject({ ok: false, metadata: { error_kind: 'validation_error' } });
    expect(bad.error).toContain('/text must be string');
    const extra = await sut.invoke('echo_tool', { text: 'a', rm: true }, ctx());
    expect(extra.error).toContain('(rm)');
    expect(run).not.toHaveBeenCalled();
    const good = await sut.invoke('echo_tool', { text: 'a' }, ctx());
    expect(good).toMatchObject({ tool: 'echo_tool', ok: true, output: 'ran', error: null });
  });

  it('answers an unknown tool with ok:false', async () => {
    const sut = new PluginToolRegistry();
    expect(await sut.invoke('nope', {}, ctx())).toMatchObject({
      ok: false,
      metadata: { error_kind: 'unknown_tool' },
    });
  });

  it('turns a throwing tool into ok:false with the message, redacted', async () => {
    const sut = new PluginToolRegistry([
      {
        manifest: manifest(),
        implementation: { run: async () => Promise.reject(new Error('failed with token hunter2-secret')) },
      },
    ]);
    const r = await sut.invoke(
      'echo_tool',
      { text: 'x' },
      ctx({ secrets: new Map([['api_token', 'hunter2-secret']]) }),
    );
    expect(r).toMatchObject({
      ok: false,
      error: 'failed with token [REDACTED]',
      metadata: { error_kind: 'tool_error' },
    });
  });

  it('times out a tool that never settles, at the manifest timeout', async () => {
    let sawAbort = false;
    const sut = new PluginToolRegistry([
      {
        manifest: manifest({ timeout_ms: 50 }),
        implementation: {
          run: (_a, c) => new Promise(() => c.signal.addEventListener('abort', () => (sawAbort = true))),
        },
      },
    ]);
    const r = await sut.invoke('echo_tool', { text: 'x' }, ctx());
    expect(r).toMatchObject({ ok: false, metadata: { error_kind: 'timeout', timed_out: true } });
    expect(sawAbort).toBe(true);
  });

  it('stops when the caller aborts', async () => {
    const outer = new AbortController();
    const sut = new PluginToolRegistry([
      { manifest: manifest(), implementation: { run: () => new Promise(() => undefined) } },
    ]);
    const pending = sut.invoke('echo_tool', { text: 'x' }, ctx({ signal: outer.signal }));
    outer.abort();
    expect(await pending).toMatchObject({ ok: false, metadata: { error_kind: 'cancelled' } });
  });

  it('redacts secrets from every part of the result', async () => {
    const secret = 'S3cr3t-Value!';
    const sut = new PluginToolRegistry([
      {
        manifest: manifest(),
        implementation: {
          run: async () => ({
            ok: true,
            output: {
              stdout: `pw=${secret}\n`,
              b64: Buffer.from(`${secret}\n`).toString('base64'),
              [secret]: 1,
            },
            metadata: { note: encodeURIComponent(secret) },
          }),
        },
      },
    ]);
    const r = await sut.invoke('echo_tool', { text: 'x' }, ctx({ secrets: new Map([['token', secret]]) }));
    const json = JSON.stringify(r);
    expect(json).not.toContain(secret);
    expect(json).not.toContain(Buffer.from(secret).toString('base64').slice(0, 12));
    expect(json).not.toContain(encodeURIComponent(secret));
    expect(r.output).toEqual({ stdout: 'pw=[REDACTED]\n', b64: '[REDACTED]', '[REDACTED]': 1 });
  });

  describe('memory tools', () => {
    const memory: MemoryToolService = {
      search: async (q, c) => [
        { id: 'm1', text: `hit for ${q.query} in ${c.session_id}`, kind: 'fact', weight: 0.5, score: 0.4 },
      ],
      insert: async (r) => ({ id: `id-${r.kind}` }),
      list: async (q) =>
        Array.from({ length: q.limit }, (_, i) => ({
          id: `m${i}`,
          text: 't',
          kind: 'fact' as const,
          weight: 1,
        })),
    };

    it('call the memory service', async () => {
      const sut = PluginToolRegistry.load({ services: { sandbox, memory } });
      expect((await sut.invoke('memory_search', { query: 'cats' }, ctx())).output).toEqual({
        hits: [expect.objectContaining({ text: 'hit for cats in sess_1' })],
      });
      expect((await sut.invoke('memory_insert', { text: 'a fact' }, ctx())).output).toEqual({
        id: 'id-fact',
      });
      expect((await sut.invoke('memory_list', { limit: 3 }, ctx())).output).toEqual({
        entries: expect.arrayContaining([expect.objectContaining({ id: 'm2' })]),
      });
    });

    it('say "memory not configured" without a service', async () => {
      const sut = PluginToolRegistry.load({ services: { sandbox, memory: null } });
      for (const [name, args] of [
        ['memory_search', { query: 'x' }],
        ['memory_insert', { text: 'x' }],
        ['memory_list', {}],
      ] as const) {
        expect(await sut.invoke(name, args, ctx())).toMatchObject({
          ok: false,
          error: 'memory not configured',
        });
      }
    });
  });

  it('file tools and shell_exec work through invoke', async () => {
    const sut = PluginToolRegistry.load({ services: { sandbox, memory: null } });
    expect(await sut.invoke('file_write', { path: 'a/b.txt', content: 'hello' }, ctx())).toMatchObject({
      ok: true,
      output: { path: 'a/b.txt', bytes: 5 },
    });
    expect(await sut.invoke('file_read', { path: 'a/b.txt' }, ctx())).toMatchObject({
      ok: true,
      output: { content: 'hello' },
    });
    expect(await sut.invoke('file_read', { path: '../outside' }, ctx())).toMatchObject({
      ok: false,
      metadata: { error_kind: 'tool_error' },
    });
    const sh = await sut.invoke('shell_exec', { command: 'cat a/b.txt; echo err >&2; exit 3' }, ctx());
    expect(sh).toMatchObject({
      ok: false,
      error: 'exit code 3',
      output: { exit_code: 3, stdout: 'hello', stderr: 'err\n' },
    });
  });
});
