import { Client, ProtocolError, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { ApiHarness, TOKENS, bootApi, waitForTask } from './api-harness';

const MODERN = '2026-07-28';
const TASKS = 'io.modelcontextprotocol/tasks';
const McpTask = z
  .object({
    taskId: z.string(),
    status: z.enum(['working', 'input_required', 'completed', 'cancelled', 'failed']),
    statusMessage: z.string().optional(),
    inputRequests: z
      .record(z.string(), z.object({ method: z.string(), params: z.record(z.string(), z.any()) }))
      .optional(),
    result: z.record(z.string(), z.any()).optional(),
  })
  .passthrough();
type McpTask = z.infer<typeof McpTask>;

/** The SDK's own 2.x client, negotiating the version (server/discover first), declaring the Tasks extension or not. */
async function modernClient(h: ApiHarness, token: string, tasks = true): Promise<Client> {
  const client = new Client(
    { name: 'e2e-2026', version: '1.0.0' },
    { versionNegotiation: { mode: 'auto' }, capabilities: tasks ? { extensions: { [TASKS]: {} } } : {} },
  );
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${h.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

/** One stateless 2026-07-28 request, no handshake before it: the version and capabilities ride in `_meta`. */
async function post(
  h: ApiHarness,
  token: string,
  method: string,
  params: Record<string, unknown>,
  name?: string,
) {
  const res = await fetch(`${h.url}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': MODERN,
      'mcp-method': method,
      ...(name ? { 'mcp-name': name } : {}),
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method,
      params: {
        ...params,
        _meta: {
          'io.modelcontextprotocol/protocolVersion': MODERN,
          'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1.0.0' },
          'io.modelcontextprotocol/clientCapabilities': { extensions: { [TASKS]: {} } },
        },
      },
    }),
  });
  return {
    status: res.status,
    body: (await res.json()) as { result?: Record<string, unknown>; error?: Record<string, unknown> },
  };
}

describe('/mcp at 2026-07-28: stateless, server/discover, the Tasks extension', () => {
  let h: ApiHarness;
  const clients: Client[] = [];
  beforeAll(async () => {
    h = await bootApi({}, { checkResponses: true });
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await h.close();
  });
  const client = async (token: string, tasks = true) => {
    const c = await modernClient(h, token, tasks);
    clients.push(c);
    return c;
  };
  const getTask = (c: Client, taskId: string) =>
    c.request({ method: 'tasks/get', params: { taskId } }, McpTask) as Promise<McpTask>;
  const until = async (c: Client, taskId: string, done: (t: McpTask) => boolean): Promise<McpTask> => {
    for (const deadline = Date.now() + 15_000; ;) {
      const task = await getTask(c, taskId);
      if (done(task)) return task;
      if (Date.now() > deadline) throw new Error(`task ${taskId} stayed ${JSON.stringify(task)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  /** submit_task answered with an MCP task: the SDK's client has no Tasks extension for tools/call, so one raw request */
  const submit = async (input: string) => {
    const { status, body } = await post(
      h,
      TOKENS.admin,
      'tools/call',
      { name: 'submit_task', arguments: { input } },
      'submit_task',
    );
    expect(status).toBe(200);
    expect(body.result).toMatchObject({
      resultType: 'task',
      status: 'working',
      ttlMs: null,
      pollIntervalMs: 1000,
    });
    return body.result!.taskId as string;
  };

  it('negotiates 2026-07-28 through server/discover, announces the extension, and gives the tool list a ttlMs', async () => {
    const c = await client(TOKENS.writer);
    expect(c.getNegotiatedProtocolVersion()).toBe(MODERN);
    expect(c.getServerCapabilities()?.extensions).toEqual({ [TASKS]: {} });
    const listed = await c.listTools();
    expect([listed.ttlMs, listed.cacheScope]).toEqual([3_600_000, 'public']);
    expect(listed.tools.map((t) => t.name)).toContain('submit_task');
    const { prompts } = await c.listPrompts();
    expect(prompts.map((p) => p.name)).toEqual(['run_task']);

    // stateless: a lone request with its version in _meta is answered, no initialize before it
    const lone = await post(
      h,
      TOKENS.reader,
      'tools/call',
      { name: 'list_tasks', arguments: { limit: 1 } },
      'list_tasks',
    );
    expect([lone.status, lone.body.result?.isError ?? false]).toEqual([200, false]);
    // the Mcp-Method routing header must name the body's method
    const res = await fetch(`${h.url}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${TOKENS.reader}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': MODERN,
        'mcp-method': 'tools/call',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 2,
        method: 'tools/list',
        params: { _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN } },
      }),
    });
    expect(res.status).toBe(400);
  });

  it('a permission request is input_required with the request in it, answered with tasks/update, through the log', async () => {
    const c = await client(TOKENS.admin);
    const taskId = await submit('run touch mcp-task.txt');
    const waiting = await until(c, taskId, (t) => t.status === 'input_required');
    const [[key, request]] = Object.entries(waiting.inputRequests!);
    const pending = (await h.request('GET', `/tasks/${taskId}`)).body.pending[0];
    expect(key).toBe(`${taskId}/${pending.request_id}`);
    expect(request).toMatchObject({
      method: 'elicitation/create',
      params: {
        mode: 'form',
        requestedSchema: {
          properties: { decision: { enum: ['allow_once', 'allow_always', 'deny', 'ask_always'] } },
        },
      },
    });
    expect(request.params.message).toContain('shell_exec');
    // a key that is not outstanding is ignored; the decision is recorded like any other
    await c.request(
      {
        method: 'tasks/update',
        params: {
          taskId,
          inputResponses: {
            [`${taskId}/perm_unknown`]: { action: 'accept', content: { decision: 'allow_always' } },
            [key]: { action: 'accept', content: { decision: 'allow_once' } },
          },
        },
      },
      z.object({}).passthrough(),
    );
    const done = await until(c, taskId, (t) => t.status === 'completed');
    expect(done.result).toMatchObject({
      isError: false,
      structuredContent: { task_id: taskId, status: 'completed' },
    });
    expect(existsSync(join(h.workspace, 'mcp-task.txt'))).toBe(true);
    const events = (await h.request('GET', `/tasks/${taskId}/events`)).body.events;
    expect(
      events
        .filter((e: { type: string }) => e.type === 'PERMISSION_RESOLVED')
        .map((e: { payload: { decision: string } }) => e.payload.decision),
    ).toEqual(['allow_once']);
  });

  it('a secret request is a URL-mode elicitation pointing at the secret endpoint; the value never crosses the protocol', async () => {
    const c = await client(TOKENS.admin);
    const taskId = await submit('run sudo -n true');
    const asked = await until(c, taskId, (t) => t.status === 'input_required');
    const [permission] = Object.keys(asked.inputRequests!);
    await c.request(
      {
        method: 'tasks/update',
        params: {
          taskId,
          inputResponses: { [permission]: { action: 'accept', content: { decision: 'allow_once' } } },
        },
      },
      z.object({}).passthrough(),
    );
    const secret = await until(
      c,
      taskId,
      (t) => t.status === 'input_required' && !(permission in t.inputRequests!),
    );
    const [[key, request]] = Object.entries(secret.inputRequests!);
    const requestId = key.split('/')[1];
    expect(request.params).toMatchObject({
      mode: 'url',
      elicitationId: key,
      url: `${h.url}/tasks/${taskId}/secrets/${requestId}`,
    });
    // the URL-mode answer only says the person went there: nothing is recorded from it
    await c.request(
      { method: 'tasks/update', params: { taskId, inputResponses: { [key]: { action: 'accept' } } } },
      z.object({}).passthrough(),
    );
    expect((await getTask(c, taskId)).status).toBe('input_required');
    const provided = await h.request('POST', new URL(request.params.url as string).pathname, {
      token: TOKENS.approver,
      body: { secret: 'not-the-sudo-password' },
    });
    expect(provided.status).toBe(202);
    const ended = await until(c, taskId, (t) => t.status !== 'input_required' && t.status !== 'working');
    expect(ended.status).toBe('completed');
  });

  it('tasks/cancel cancels our task; unknown tasks, missing scopes and clients without the extension get protocol errors', async () => {
    const c = await client(TOKENS.admin);
    const taskId = await submit('run touch never-made.txt');
    await until(c, taskId, (t) => t.status === 'input_required');
    await c.request({ method: 'tasks/cancel', params: { taskId } }, z.object({}).passthrough());
    expect((await until(c, taskId, (t) => t.status === 'cancelled')).status).toBe('cancelled');
    expect((await waitForTask(h, taskId)).status).toBe('cancelled');
    expect(existsSync(join(h.workspace, 'never-made.txt'))).toBe(false);

    const refusal = (p: Promise<unknown>) =>
      p.then(
        () => null,
        (err: unknown) => err as ProtocolError,
      );
    expect(await refusal(getTask(c, 'task_nope'))).toMatchObject({ code: -32602 });
    const reader = await client(TOKENS.reader);
    expect(
      await refusal(
        reader.request({ method: 'tasks/cancel', params: { taskId } }, z.object({}).passthrough()),
      ),
    ).toMatchObject({ code: -32602, message: 'this operation needs the tasks:write scope' });
    const plain = await client(TOKENS.admin, false);
    expect(await refusal(getTask(plain, taskId))).toMatchObject({ code: -32021 });
    // without the extension submit_task answers as a plain tool
    const call = await plain.callTool({ name: 'submit_task', arguments: { input: 'run echo plain' } });
    expect(call.structuredContent).toMatchObject({ task_id: expect.stringMatching(/^task_/) });
  });

  it('answered every request above as the OpenAPI document describes it', () => {
    expect(h.responseMismatches).toEqual([]);
  });
});
