import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  McpServer,
  acceptedContent,
  createMcpHandler,
  inputRequired,
  type McpHttpHandler,
} from '@modelcontextprotocol/server';
import { McpServer as LegacyMcpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { ToolSandbox } from '../sandbox';
import type { ToolExecutionContext } from '../tool-registry';
import { ElicitationAnswer, ToolInputRequired } from './elicitation';
import { McpClientManager } from './mcp-client-manager';

const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
const TTL_MS = 400;

async function bodyOf(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

const listen = (server: Server): Promise<string> =>
  new Promise((ok) =>
    server.listen(0, '127.0.0.1', () => ok(`http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`)),
  );

/**
 * A server of the 2.x SDK speaking 2026-07-28: its tool list names how many times it was listed
 * (fresh for TTL_MS), and `confirm` asks a question through input_required until the retry
 * carries the answer.
 */
function modernServer() {
  const listedAt: number[] = [];
  const handler: McpHttpHandler = createMcpHandler((ctx) => {
    const server = new McpServer(
      { name: 'modern', version: '1.0.0' },
      { cacheHints: { 'tools/list': { ttlMs: TTL_MS, cacheScope: 'public' } } },
    );
    server.registerTool(`generation_${listedAt.length}`, { description: 'which listing this is' }, () => ({
      content: [{ type: 'text', text: String(listedAt.length) }],
    }));
    server.registerTool('protocol', { description: 'the protocol version of this request' }, (c) => ({
      content: [
        {
          type: 'text',
          text: String(
            ((c.mcpReq.envelope ?? {}) as Record<string, unknown>)[
              'io.modelcontextprotocol/protocolVersion'
            ] ?? ctx.era,
          ),
        },
      ],
    }));
    server.registerTool('confirm', { description: 'asks for a name first' }, (c) => {
      const answer = acceptedContent<{ name: string }>(c.mcpReq.inputResponses, 'name');
      if (!answer)
        return inputRequired({
          inputRequests: {
            name: inputRequired.elicit({
              message: 'Who confirms?',
              requestedSchema: {
                type: 'object',
                properties: { name: { type: 'string' } },
                required: ['name'],
              },
            }),
          },
        });
      return { content: [{ type: 'text', text: `confirmed by ${answer.name}` }] };
    });
    return server;
  });
  const http = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const body = await bodyOf(req);
    if (req.headers['mcp-method'] === 'tools/list') listedAt.push(Date.now());
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers.set(k, v);
    const answer = await handler.fetch(
      new Request(`http://127.0.0.1${req.url}`, {
        method: req.method,
        headers,
        body: req.method === 'POST' ? new Uint8Array(body) : undefined,
      }),
    );
    res.writeHead(answer.status, Object.fromEntries(answer.headers));
    res.end(Buffer.from(await answer.arrayBuffer()));
  });
  return { http, listedAt, close: () => handler.close() };
}

/** A server of the 1.x SDK: 2025-11-25 only (server/discover is a method it does not know). */
function legacyServer(): Server {
  return createServer(async (req, res) => {
    const server = new LegacyMcpServer({ name: 'legacy', version: '1.0.0' });
    server.registerTool('hello', { description: 'says hello' }, () => ({
      content: [{ type: 'text', text: 'hello from 2025' }],
    }));
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    res.on('close', () => void server.close());
    await server.connect(transport);
    await transport.handleRequest(req, res, JSON.parse((await bodyOf(req)).toString() || 'null'));
  });
}

describe('the MCP client speaks 2026-07-28 to servers that do and 2025-11-25 to the rest', () => {
  let dir: string;
  let modern: ReturnType<typeof modernServer>;
  let legacy: Server;
  let urls: { modern: string; legacy: string };
  const managers: McpClientManager[] = [];
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rl-mcp-versions-'));
    modern = modernServer();
    legacy = legacyServer();
    urls = { modern: await listen(modern.http), legacy: await listen(legacy) };
  });
  afterEach(async () => {
    // each lists its servers again every TTL_MS while open
    await Promise.all(managers.splice(0).map((m) => m.close()));
  });
  afterAll(async () => {
    await modern.close();
    await new Promise((ok) => modern.http.close(ok));
    await new Promise((ok) => legacy.close(ok));
    rmSync(dir, { recursive: true, force: true });
  });

  const start = async (servers = urls) => {
    const manager = new McpClientManager({
      servers: Object.entries(servers).map(([name, url]) => ({
        name,
        url,
        headers_from: {},
        timeout_ms: 10_000,
      })),
      sandbox: new ToolSandbox({ allowedRoot: join(dir, 'root'), mode: 'process', logger: quiet }),
      blobDir: join(dir, 'blobs'),
      env: {},
      logger: quiet,
      backoffMs: 60_000,
    });
    managers.push(manager);
    await manager.start();
    return manager;
  };
  const call = async (
    m: McpClientManager,
    name: string,
    answers: (index: number) => ElicitationAnswer | undefined = () => undefined,
  ) => {
    const tool = m.get(name);
    if (!tool) throw new Error(`${name} is not listed: ${JSON.stringify(m.status())}`);
    const ctx: ToolExecutionContext = {
      task_id: 'task_1',
      session_id: 'ses_1',
      step_id: null,
      call_id: 'call_1',
      signal: new AbortController().signal,
      secrets: new Map(),
      elicitationAnswer: answers,
    };
    return tool.server.call(tool.entry, {}, ctx);
  };

  it('negotiates each server its own revision', async () => {
    const m = await start();
    expect(m.status().map((s) => [s.name, s.state, s.protocol_version])).toEqual([
      ['modern', 'ready', '2026-07-28'],
      ['legacy', 'ready', '2025-11-25'],
    ]);
    expect((await call(m, 'mcp__modern__protocol')).output).toBe('2026-07-28');
    expect((await call(m, 'mcp__legacy__hello')).output).toBe('hello from 2025');
  });

  it("answers a 2026 server's question from the recorded answer on each round, the same after a restart", async () => {
    const recorded = (index: number): ElicitationAnswer | undefined =>
      index === 1 ? { action: 'accept', content: { name: 'Ada' } } : undefined;
    const first = await start();
    expect((await call(first, 'mcp__modern__confirm', recorded)).output).toBe('confirmed by Ada');
    // not answered yet: the call stops with the question, to be recorded and asked of a person
    const unanswered = await call(first, 'mcp__modern__confirm').catch((err: unknown) => err);
    expect(unanswered).toBeInstanceOf(ToolInputRequired);
    expect(unanswered).toMatchObject({ index: 1, request: { message: 'Who confirms?' } });
    await first.close();
    // a restarted client (or a replay) gives the server the same answer
    const restarted = await start();
    expect((await call(restarted, 'mcp__modern__confirm', recorded)).output).toBe('confirmed by Ada');
  });

  it('keeps a tool list for the ttlMs its server gave, and lists again once it is stale', async () => {
    // a server of its own: the other tests' clients list theirs too
    const own = modernServer();
    const m = await start({ modern: await listen(own.http), legacy: urls.legacy });
    const generationNow = () =>
      m.tools().find((t) => t.server.config.name === 'modern' && /generation_/.test(t.entry.remoteName))
        ?.entry.remoteName;
    const first = generationNow();
    expect(m.status().map((s) => s.tools_ttl_ms)).toEqual([TTL_MS, null]);
    for (const deadline = Date.now() + 10 * TTL_MS; own.listedAt.length < 3 && Date.now() < deadline;)
      await new Promise((r) => setTimeout(r, 20));
    await new Promise((r) => setTimeout(r, 50));
    expect(own.listedAt.length).toBeGreaterThanOrEqual(3);
    // never asked again while the list was fresh
    const gaps = own.listedAt.slice(1).map((t, i) => t - own.listedAt[i]);
    for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(TTL_MS - 5);
    expect(generationNow()).toMatch(/^generation_\d+$/);
    expect(generationNow()).not.toBe(first);
    await m.close();
    await own.close();
    await new Promise((ok) => own.http.close(ok));
  });
});
