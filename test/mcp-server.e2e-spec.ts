import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { join } from 'node:path';
import { isTerminalStatus } from '@runledger/contracts';
import { McpClientManager, ToolSandbox } from '@runledger/tools';
import { ApiHarness, TOKENS, bootApi } from './api-harness';

/** The SDK's own client on /mcp with a bearer token. */
async function connect(h: ApiHarness, token: string | null): Promise<Client> {
  const client = new Client({ name: 'e2e-agent', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${h.url}/mcp`), {
    requestInit: token ? { headers: { authorization: `Bearer ${token}` } } : {},
  });
  await client.connect(transport);
  return client;
}

/** A tool's answer: its structured content, or its JSON text when it failed. */
async function call(client: Client, name: string, args: Record<string, unknown>) {
  const result = await client.callTool({ name, arguments: args });
  const text = (result.content as Array<{ type: string; text: string }>)[0].text;
  return { isError: result.isError === true, body: JSON.parse(text), structured: result.structuredContent };
}

describe('/mcp: Runledger as an MCP server', () => {
  let h: ApiHarness;
  const clients: Client[] = [];
  beforeAll(async () => {
    h = await bootApi();
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await h.close();
  });
  const client = async (token: string | null) => {
    const c = await connect(h, token);
    clients.push(c);
    return c;
  };

  it('lists the task tools and the task log resource template', async () => {
    const c = await client(TOKENS.writer);
    const { tools } = await c.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([
      'cancel_task',
      'get_events',
      'get_task',
      'list_tasks',
      'provide_secret',
      'resolve_permission',
      'submit_task',
    ]);
    expect(tools.find((t) => t.name === 'get_task')?.annotations?.readOnlyHint).toBe(true);
    const { resourceTemplates } = await c.listResourceTemplates();
    expect(resourceTemplates.map((r) => r.uriTemplate)).toEqual(['runledger://tasks/{task_id}/events']);
  });

  it('submits a task with a tasks:write token and follows it to its stop reason; its log reads as a resource', async () => {
    const c = await client(TOKENS.writer);
    const submitted = await call(c, 'submit_task', { input: 'run echo from-mcp' });
    expect(submitted).toMatchObject({ isError: false, body: { task_id: expect.any(String) } });
    const taskId = submitted.body.task_id as string;
    let task = (await call(c, 'get_task', { task_id: taskId })).body;
    for (const deadline = Date.now() + 15_000; !isTerminalStatus(task.status) && Date.now() < deadline;) {
      await new Promise((r) => setTimeout(r, 50));
      task = (await call(c, 'get_task', { task_id: taskId })).body;
    }
    expect(task).toMatchObject({ status: 'completed', stop_reason: 'completed' });
    expect(task.result).toContain('from-mcp');

    const events = await call(c, 'get_events', { task_id: taskId, limit: 2 });
    expect(events.body.events.map((e: { type: string }) => e.type)).toEqual([
      'TASK_RECEIVED',
      'CONTEXT_BUILT',
    ]);
    const listed = await call(c, 'list_tasks', { limit: 5 });
    expect(listed.body.tasks.map((t: { task_id: string }) => t.task_id)).toContain(taskId);

    const { resources } = await c.listResources();
    expect(resources.map((r) => r.uri)).toContain(`runledger://tasks/${taskId}/events`);
    const read = await c.readResource({ uri: `runledger://tasks/${taskId}/events` });
    const log = JSON.parse((read.contents[0] as { text: string }).text);
    expect(log.events.at(-1).type).toBe('TASK_COMPLETED');
  });

  it('a token without tasks:write is refused submit_task and cancel_task, nothing written', async () => {
    const c = await client(TOKENS.reader);
    const before = (await call(c, 'list_tasks', {})).body.tasks.length;
    const refused = await call(c, 'submit_task', { input: 'run echo no' });
    expect(refused).toMatchObject({
      isError: true,
      body: { error: 'forbidden', message: 'this operation needs the tasks:write scope' },
    });
    expect((await call(c, 'cancel_task', { task_id: 'task_x' })).body.error).toBe('forbidden');
    expect((await call(c, 'list_tasks', {})).body.tasks).toHaveLength(before);
    // approvals only: may answer requests, may not read tasks
    const approver = await client(TOKENS.approver);
    expect((await call(approver, 'get_task', { task_id: 'task_x' })).body.error).toBe('forbidden');
  });

  it('bad input and unknown tasks are errors with {error, message, details}', async () => {
    const c = await client(TOKENS.admin);
    expect((await call(c, 'get_task', { task_id: 'task_nope' })).body).toMatchObject({
      error: 'not_found',
      details: { task_id: 'task_nope' },
    });
    const bad = await c.callTool({ name: 'get_events', arguments: { task_id: 'x', limit: 0 } });
    expect(bad.isError).toBe(true);
    expect((bad.content as Array<{ text: string }>)[0].text).toMatch(/limit/);
  });

  it('without a valid token the connection is refused (401, JSON error body); a page of another origin is 403 (DNS rebinding); GET is 405', async () => {
    await expect(connect(h, null)).rejects.toThrow(/"error":"unauthorized","message":"missing bearer token/);
    await expect(connect(h, 'tok-wrong-0123456789abcdef')).rejects.toThrow(/"message":"invalid token"/);
    const res = await h.request('POST', '/mcp', {
      token: null,
      body: { jsonrpc: '2.0', id: 1, method: 'ping' },
    });
    expect(res.status).toBe(401);
    expect(res.body).toMatchObject({ error: 'unauthorized' });
    const rebound = await h.request('POST', '/mcp', {
      headers: { origin: 'http://evil.example.com', accept: 'application/json, text/event-stream' },
      body: { jsonrpc: '2.0', id: 1, method: 'ping' },
    });
    expect([rebound.status, rebound.body.error]).toEqual([403, 'forbidden']);
    const get = await h.request('GET', '/mcp');
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toContain('POST');
  });
});

describe("Runledger's MCP client over Streamable HTTP (against /mcp)", () => {
  let h: ApiHarness;
  beforeAll(async () => {
    h = await bootApi();
  });
  afterAll(async () => {
    await h.close();
  });
  const managerFor = (env: NodeJS.ProcessEnv) =>
    new McpClientManager({
      servers: [
        {
          name: 'rl',
          url: `${h.url}/mcp`,
          headers_from: { Authorization: 'RL_E2E_MCP_AUTH' },
          timeout_ms: 10_000,
        },
      ],
      sandbox: new ToolSandbox({ allowedRoot: h.workspace, mode: 'process' }),
      blobDir: join(h.dir, 'mcp-blobs'),
      env,
      logger: { warn: () => undefined },
      backoffMs: 60_000,
    });

  it('sends the header headers_from names, lists the tools and calls them', async () => {
    const sut = managerFor({ RL_E2E_MCP_AUTH: `Bearer ${TOKENS.writer}` });
    try {
      await sut.start();
      expect(sut.status()[0]).toMatchObject({ name: 'rl', transport: 'http', state: 'ready', error: null });
      const submit = sut.get('mcp__rl__submit_task')!;
      expect(submit.entry.manifest).toMatchObject({ requires_permission: true, read_only: false });
      expect(sut.get('mcp__rl__get_task')!.entry.manifest.read_only).toBe(true);
      const ctx = {
        task_id: 't',
        session_id: 's',
        step_id: null,
        call_id: 'c',
        signal: new AbortController().signal,
        secrets: new Map<string, string>(),
      };
      const out = await submit.server.call(submit.entry, { input: 'run echo via-http' }, ctx);
      expect(out.ok).toBe(true);
      const { structured_content } = out.output as { structured_content: { task_id: string } };
      expect(structured_content.task_id).toMatch(/^task_/);
    } finally {
      await sut.close();
    }
  });

  it('a server that refuses the token is failed, with its answer as the reason', async () => {
    const sut = managerFor({ RL_E2E_MCP_AUTH: 'Bearer tok-not-a-valid-token-000' });
    try {
      await sut.start();
      expect(sut.status()[0]).toMatchObject({
        state: 'failed',
        tools: [],
        error: expect.stringContaining('requires authorization (HTTP 401)'),
      });
      expect(sut.tools()).toEqual([]);
    } finally {
      await sut.close();
    }
  });
});
