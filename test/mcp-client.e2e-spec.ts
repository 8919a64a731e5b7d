import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { RuntimeEvent } from '@runledger/contracts';
import { McpClientManager } from '@runledger/tools';
import { ApiHarness, TOKENS, bootApi, waitForTask } from './api-harness';
import { runCli } from './support/cli';
import { untilListed } from './support/mcp';

const BIN = resolve(__dirname, '..', 'node_modules', '.bin');
const tool = (name: string, args: Record<string, unknown> = {}) =>
  JSON.stringify({ type: 'tool', tool: name, args });

/**
 * One task drives the npm servers nobody here wrote (server-everything, server-filesystem rooted in
 * the allowed root), as child processes under bubblewrap, through every gate an MCP call has.
 */
describe('MCP servers from npm as the tools of a scripted task', () => {
  let h: ApiHarness;
  let dir: string;
  const manager = () => h.app.get(McpClientManager);
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rl-mcp-client-'));
    process.env.RL_MCP_E2E_GREETING = 'hello from env_from';
    process.env.RL_MCP_E2E_NOT_PASSED = 'service-only-value';
    writeFileSync(
      join(dir, 'script.json'),
      JSON.stringify({
        orchestrator: [
          tool('mcp__everything__echo', { message: 'hello mcp' }),
          tool('mcp__everything__get-env'),
          tool('mcp__everything__get-tiny-image'),
          tool('mcp__fs__read_text_file', { path: 'seed.txt' }),
          tool('mcp__fs__write_file', { path: 'denied.txt', content: 'never written' }),
          tool('mcp__everything__trigger-elicitation-request'),
          tool('mcp__everything__trigger-long-running-operation', { duration: 30, steps: 30 }),
          // decided a few seconds later: the killed server is back by then
          { content: tool('mcp__everything__echo', { message: 'after restart' }), delay_ms: 4000 },
          JSON.stringify({ type: 'respond', content: 'all MCP calls done' }),
        ],
      }),
    );
    h = await bootApi(
      {
        // the boot checks that the variable named in env_from is set; the servers read the process's
        RL_MCP_E2E_GREETING: process.env.RL_MCP_E2E_GREETING,
        RUNLEDGER_MODEL: `scripted:${join(dir, 'script.json')}`,
        RUNLEDGER_MEMORY: 'off',
        RUNLEDGER_CRITIC: 'heuristic',
        RUNLEDGER_SANDBOX: 'bwrap',
        RUNLEDGER_MCP_SERVERS: JSON.stringify([
          {
            name: 'everything',
            command: join(BIN, 'mcp-server-everything'),
            env_from: { GREETING: 'RL_MCP_E2E_GREETING' },
            timeout_ms: 60_000,
          },
          { name: 'fs', command: join(BIN, 'mcp-server-filesystem'), args: ['.'] },
          { name: 'missing', command: 'no-such-mcp-server-binary' },
        ]),
        RUNLEDGER_PERMISSION_RULES: JSON.stringify({
          mcp_allow: ['everything'],
          mcp_allow_read_only: true,
        }),
      },
      { checkResponses: true },
    );
    writeFileSync(join(h.workspace, 'seed.txt'), 'seeded line\n');
    await untilListed(h.app.get(McpClientManager), 'mcp__everything__trigger-elicitation-request');
  }, 60_000);
  afterAll(async () => {
    await h?.close();
    rmSync(dir, { recursive: true, force: true });
    delete process.env.RL_MCP_E2E_GREETING;
    delete process.env.RL_MCP_E2E_NOT_PASSED;
  });

  it('boots with the servers that start; the one that cannot is a warning in /health, its tools absent', async () => {
    const status = manager().status();
    expect(status.map((s) => [s.name, s.state])).toEqual([
      ['everything', 'ready'],
      ['fs', 'ready'],
      ['missing', 'failed'],
    ]);
    expect(status[0].tools).toEqual(
      expect.arrayContaining(['mcp__everything__echo', 'mcp__everything__trigger-elicitation-request']),
    );
    const health = await h.request('GET', '/health', { token: null });
    expect(health.status).toBe(200);
    expect(health.body.warnings).toEqual([
      expect.stringMatching(/^MCP server missing is failed .*not found on PATH.*its tools are absent$/),
    ]);
  });

  it('runs the calls through the gates: allowed, denied before the server, a form answered, a killed server', async () => {
    const taskId = (
      await h.request('POST', '/tasks', { token: TOKENS.writer, body: { input: 'use the MCP tools' } })
    ).body.task_id as string;

    // write_file asks (no rule allows it); denied, it never reaches the server
    const asked = await waitForTask(h, taskId, (s) => s === 'awaiting_permission');
    expect(asked.pending[0]).toMatchObject({ tool: 'mcp__fs__write_file', kind: 'permission' });
    const denied = await h.request('POST', `/tasks/${taskId}/permissions/${asked.pending[0].request_id}`, {
      token: TOKENS.approver,
      body: { decision: 'deny' },
    });
    expect(denied.status).toBe(202);

    // the elicitation tool's form comes through the same endpoint and goes back to the server
    const form = await waitForTask(h, taskId, (s) => s === 'awaiting_permission');
    expect(form.pending[0]).toMatchObject({
      tool: 'mcp__everything__trigger-elicitation-request',
      call_id: expect.stringMatching(/\.elicit1$/),
      args: { message: expect.any(String), requested_schema: expect.objectContaining({ type: 'object' }) },
    });
    const path = `/tasks/${taskId}/permissions/${form.pending[0].request_id}`;
    const incomplete = await h.request('POST', path, {
      token: TOKENS.approver,
      body: { decision: 'allow_once', content: { check: 'yes' } },
    });
    expect([incomplete.status, incomplete.body.error]).toEqual([400, 'validation_error']);
    const answered = await h.request('POST', path, {
      token: TOKENS.approver,
      body: { decision: 'allow_once', content: { name: 'Ada Lovelace', check: true } },
    });
    expect(answered.status).toBe(202);

    // the long-running call is under way: its server is killed
    const events = async () =>
      (await h.request('GET', `/tasks/${taskId}/events?limit=1000`)).body.events as RuntimeEvent[];
    for (let i = 0; i < 400; i++) {
      if (
        (await events()).some(
          (e) => e.type === 'TOOL_CALLED' && e.payload.tool.endsWith('long-running-operation'),
        )
      )
        break;
      await new Promise((r) => setTimeout(r, 25));
    }
    const pid = manager().status()[0].pid!;
    process.kill(pid, 'SIGKILL');

    const done = await waitForTask(h, taskId, undefined, 60_000);
    expect(done).toMatchObject({ status: 'completed', result: 'all MCP calls done' });
    const log = await events();
    const outcome = (name: string, nth = 0) =>
      log.filter((e) => (e.type === 'TOOL_COMPLETED' || e.type === 'TOOL_FAILED') && e.payload.tool === name)[
        nth
      ];

    expect(outcome('mcp__everything__echo')).toMatchObject({
      type: 'TOOL_COMPLETED',
      payload: { result: { output: 'Echo: hello mcp' } },
    });
    // only what env_from names reaches the child, beside PATH, HOME and LANG
    const env = JSON.stringify(outcome('mcp__everything__get-env').payload);
    expect(env).toContain('hello from env_from');
    expect(env).not.toContain('service-only-value');
    expect(env).not.toContain(TOKENS.admin);
    // the image is a file beside the database, described, never inlined
    const image = outcome('mcp__everything__get-tiny-image');
    const attachment = (
      image.payload as { result: { output: { attachments: Array<{ file: string; bytes: number }> } } }
    ).result.output.attachments[0];
    expect(attachment.file.startsWith(join(h.dir, 'mcp-blobs'))).toBe(true);
    expect(readFileSync(attachment.file).length).toBe(attachment.bytes);
    expect(JSON.stringify(log)).not.toMatch(/iVBORw0KGgo/); // no PNG as base64 anywhere in the log
    expect(outcome('mcp__fs__read_text_file')).toMatchObject({
      type: 'TOOL_COMPLETED',
      // text and structured content both kept
      payload: {
        result: { output: { text: 'seeded line\n', structured_content: { content: 'seeded line\n' } } },
      },
    });
    expect(outcome('mcp__fs__write_file')).toMatchObject({
      type: 'TOOL_FAILED',
      payload: { error_kind: 'permission_denied' },
    });
    expect(log.some((e) => e.type === 'TOOL_CALLED' && e.payload.tool === 'mcp__fs__write_file')).toBe(false);
    expect(existsSync(join(h.workspace, 'denied.txt'))).toBe(false);
    expect(outcome('mcp__everything__trigger-elicitation-request')).toMatchObject({
      type: 'TOOL_COMPLETED',
      payload: { result: { output: expect.stringContaining('Ada Lovelace') } },
    });
    expect(outcome('mcp__everything__trigger-long-running-operation')).toMatchObject({
      type: 'TOOL_FAILED',
      payload: { error_kind: 'tool_error' },
    });
    expect(outcome('mcp__everything__echo', 1)).toMatchObject({
      type: 'TOOL_COMPLETED',
      payload: { result: { output: 'Echo: after restart' } },
    });
    const everything = manager().status()[0];
    expect([everything.state, everything.restarts, everything.pid]).toEqual(['ready', 1, expect.any(Number)]);
    expect(everything.pid).not.toBe(pid);
  }, 120_000);

  it('answered every request above as the OpenAPI document describes it', () => {
    expect(h.responseMismatches).toEqual([]);
  });
});

describe('runledger mcp list', () => {
  it('starts each configured server and shows its state and tools; exit 1 when one is down', async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'rl-mcp-cli-'));
    try {
      const servers = JSON.stringify([
        { name: 'fs', command: join(BIN, 'mcp-server-filesystem'), args: ['.'] },
        { name: 'missing', command: 'no-such-mcp-server-binary' },
      ]);
      const text = await runCli(['mcp', 'list'], { cwd, env: { RUNLEDGER_MCP_SERVERS: servers } });
      expect(text.code).toBe(1);
      expect(text.stdout).toMatch(/^fs {2}stdio {2}ready {2}\d+ tool\(s\)$/m);
      expect(text.stdout).toMatch(
        /^ {2}mcp__fs__read_text_file \[read-only\] {2}Read the complete contents/m,
      );
      expect(text.stdout).toMatch(
        /^missing {2}stdio {2}failed {2}no-such-mcp-server-binary: not found on PATH$/m,
      );

      const json = await runCli(['mcp', 'list', '--json'], {
        cwd,
        env: { RUNLEDGER_MCP_SERVERS: JSON.stringify([JSON.parse(servers)[0]]) },
      });
      expect(json.code).toBe(0);
      const listed = JSON.parse(json.stdout).mcp;
      expect(listed).toEqual([expect.objectContaining({ name: 'fs', state: 'ready', error: null })]);
      expect(listed[0].tools.map((t: { name: string }) => t.name)).toContain('mcp__fs__write_file');
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  }, 60_000);
});
