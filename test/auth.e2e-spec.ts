import { statSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  Client,
  StreamableHTTPClientTransport,
  SdkHttpError,
  discoverOAuthProtectedResourceMetadata,
  discoverOAuthServerInfo,
  extractWWWAuthenticateParams,
} from '@modelcontextprotocol/client';
import { IncomingMessage } from 'node:http';
import WebSocket from 'ws';
import { ApiHarness, TOKENS, WsClient, bootApi, eventCount, waitForTask } from './api-harness';

const WRONG = 'wrong-token-0123456789abcdef-wrong';
const SECRET = 'hunter2-super-secret-value';

describe('access control (e2e)', () => {
  let sut: ApiHarness;
  let taskId: string;

  beforeAll(async () => {
    sut = await bootApi({}, { checkResponses: true });
    taskId = (await sut.request('POST', '/tasks', { body: { input: 'auth target' } })).body.task_id;
    await waitForTask(sut, taskId);
  });
  afterAll(async () => {
    await sut.close();
  });

  /** every route but the open ones (/health, /docs, /admin's page), with a token that lacks its scope */
  const routes = (): Array<{ method: string; path: string; body?: unknown; lacking: string }> => [
    { method: 'POST', path: '/tasks', body: { input: 'should never run' }, lacking: TOKENS.reader },
    { method: 'GET', path: '/tasks', lacking: TOKENS.approver },
    { method: 'GET', path: `/tasks/${taskId}`, lacking: TOKENS.approver },
    { method: 'GET', path: `/tasks/${taskId}/events`, lacking: TOKENS.approver },
    { method: 'GET', path: `/tasks/${taskId}/stream`, lacking: TOKENS.approver },
    { method: 'POST', path: `/tasks/${taskId}/cancel`, lacking: TOKENS.reader },
    {
      method: 'POST',
      path: `/tasks/${taskId}/permissions/perm_1`,
      body: { decision: 'allow_once' },
      lacking: TOKENS.writer,
    },
    {
      method: 'POST',
      path: `/tasks/${taskId}/secrets/sec_1`,
      body: { secret: SECRET },
      lacking: TOKENS.writer,
    },
    { method: 'GET', path: '/admin/events', lacking: TOKENS.writer },
    { method: 'GET', path: '/metrics', lacking: TOKENS.writer },
    { method: 'GET', path: '/memory', lacking: TOKENS.writer },
    { method: 'DELETE', path: '/memory/mem_1', lacking: TOKENS.writer },
  ];

  it('answers every route 401 without or with a wrong token and 403 without the scope, writing nothing', async () => {
    const before = await eventCount(sut);
    for (const r of routes()) {
      for (const [token, status, error] of [
        [null, 401, 'unauthorized'],
        [WRONG, 401, 'unauthorized'],
        [r.lacking, 403, 'forbidden'],
      ] as const) {
        const res = await sut.request(r.method, r.path, { token, body: r.body });
        expect({ route: `${r.method} ${r.path}`, token, status: res.status, error: res.body?.error }).toEqual(
          { route: `${r.method} ${r.path}`, token, status, error },
        );
        if (status === 401)
          expect(res.headers.get('www-authenticate')).toBe(
            `Bearer realm="runledger", ${token ? 'error="invalid_token", ' : ''}resource_metadata="${sut.url}/.well-known/oauth-protected-resource"`,
          );
      }
      const malformed = await sut.request(r.method, r.path, {
        token: null,
        body: r.body,
        headers: { authorization: `Basic ${TOKENS.admin}` },
      });
      expect(malformed.status).toBe(401);
    }
    expect(await eventCount(sut)).toBe(before);
  });

  it("tells MCP clients, through the SDK's own discovery, that bearer tokens are taken and no OAuth flow is offered", async () => {
    const mcp = await fetch(`${sut.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
    });
    expect(mcp.status).toBe(401);
    const challenge = extractWWWAuthenticateParams(mcp);
    expect(challenge.resourceMetadataUrl?.href).toBe(`${sut.url}/.well-known/oauth-protected-resource`);
    // the path-suffixed form is what an MCP client asks first for the resource /mcp
    const forMcp = await discoverOAuthProtectedResourceMetadata(`${sut.url}/mcp`);
    expect(forMcp).toEqual({
      resource: `${sut.url}/mcp`,
      bearer_methods_supported: ['header'],
      scopes_supported: ['tasks:read', 'tasks:write', 'approvals', 'admin'],
      resource_name: 'Runledger',
      resource_documentation: `${sut.url}/docs`,
    });
    const forService = await discoverOAuthProtectedResourceMetadata(sut.url, {
      resourceMetadataUrl: challenge.resourceMetadataUrl,
    });
    expect(forService.resource).toBe(sut.url);
    expect(forService.authorization_servers).toBeUndefined();
    // no authorization server here either: the discovery ends with nothing to start a flow with
    const info = await discoverOAuthServerInfo(`${sut.url}/mcp`);
    expect(info.authorizationServerMetadata).toBeUndefined();

    const client = new Client({ name: 'auth-e2e', version: '1.0.0' });
    const refused = await client.connect(new StreamableHTTPClientTransport(new URL(`${sut.url}/mcp`))).then(
      () => null,
      (err: unknown) => err,
    );
    // no auth provider given: the client stops at the 401 instead of starting a flow
    expect(refused).toBeInstanceOf(SdkHttpError);
    expect((refused as SdkHttpError).status).toBe(401);

    const upgrade = await new Promise<IncomingMessage>((done, fail) => {
      const ws = new WebSocket(sut.wsUrl, { headers: { authorization: `Bearer ${WRONG}` } });
      ws.on('unexpected-response', (_req, res) => done(res));
      ws.on('open', () => fail(new Error('a wrong token opened a socket')));
      ws.on('error', () => undefined);
    });
    expect(upgrade.statusCode).toBe(401);
    expect(upgrade.headers['www-authenticate']).toMatch(
      /^Bearer realm="runledger", error="invalid_token", resource_metadata="http:\/\/127\.0\.0\.1:\d+\/\.well-known\/oauth-protected-resource"$/,
    );
  });

  it('lets each scope do its own work and admin everything', async () => {
    expect((await sut.request('GET', '/tasks', { token: TOKENS.reader })).status).toBe(200);
    expect((await sut.request('GET', `/tasks/${taskId}/events`, { token: TOKENS.reader })).status).toBe(200);
    expect(
      (await sut.request('POST', '/tasks', { token: TOKENS.writer, body: { input: 'writer task' } })).status,
    ).toBe(202);
    // approvals: the request is not pending, so the token passes auth and the runtime refuses (404/409), not 401/403
    const approval = await sut.request('POST', `/tasks/${taskId}/permissions/perm_1`, {
      token: TOKENS.approver,
      body: { decision: 'deny' },
    });
    expect([404, 409]).toContain(approval.status);
    const secret = await sut.request('POST', `/tasks/${taskId}/secrets/sec_1`, {
      token: TOKENS.approver,
      body: { secret: SECRET },
    });
    expect([404, 409]).toContain(secret.status);
    expect(secret.text).not.toContain(SECRET);
    const malformed = await sut.request('POST', `/tasks/${taskId}/secrets/sec_1`, {
      token: TOKENS.approver,
      raw: `{"secret": ${SECRET}}`,
    });
    expect(malformed.status).toBe(400);
    // JSON.parse quotes a piece of the body in its message; not even a prefix of the secret may come back
    expect(malformed.text).not.toContain(SECRET.slice(0, 7));
    expect((await sut.request('GET', '/metrics', { token: TOKENS.admin })).status).toBe(200);
    expect((await sut.request('GET', '/health', { token: null })).status).toBe(200);
  });

  it('applies the same tokens and scopes on the WebSocket', async () => {
    const anon = await WsClient.open(sut.wsUrl);
    anon.send({ type: 'subscribe', task_id: taskId, after_seq: 0 });
    expect(await anon.waitFor((m) => m.type === 'error')).toMatchObject({ error: 'unauthorized' });
    anon.close();
    const approver = await WsClient.authed(sut.wsUrl, TOKENS.approver);
    approver.send({ type: 'subscribe', task_id: taskId, after_seq: 0 });
    expect(await approver.waitFor((m) => m.type === 'error')).toMatchObject({ error: 'forbidden' });
    approver.close();
    const wrong = await WsClient.open(sut.wsUrl);
    wrong.send({ type: 'auth', token: WRONG });
    expect((await wrong.closed).code).toBe(4401);
  });

  it('never writes a token or a secret to the logs', async () => {
    const text = sut.logs.join('');
    expect(sut.logs.length).toBeGreaterThan(20);
    for (const t of [...Object.values(TOKENS), WRONG, SECRET]) expect(text).not.toContain(t);
  });

  it('answered every request above as the OpenAPI document describes it', () => {
    expect(sut.responseMismatches).toEqual([]);
  });
});

describe('rate limit, generated admin token, CORS (e2e)', () => {
  it('limits requests per token with 429 and Retry-After; other tokens are unaffected', async () => {
    const sut = await bootApi({ RUNLEDGER_RATE_LIMIT: '5' });
    try {
      const statuses = [];
      for (let i = 0; i < 6; i++)
        statuses.push((await sut.request('GET', '/tasks', { token: TOKENS.reader })).status);
      expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
      const limited = await sut.request('GET', '/tasks', { token: TOKENS.reader });
      expect(limited.body.error).toBe('rate_limited');
      expect(limited.body.message).toMatch(
        /^rate limit of 5 requests per minute for this token; retry after \d+ s$/,
      );
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
      expect((await sut.request('GET', '/tasks', { token: TOKENS.writer })).status).toBe(200);
      expect((await sut.request('GET', '/health', { token: null })).status).toBe(200);
    } finally {
      await sut.close();
    }
  });

  it('generates an admin token (0600, beside the DB) on first boot when none is configured, and reuses it', async () => {
    const sut = await bootApi({ RUNLEDGER_ADMIN_TOKEN: '', RUNLEDGER_TOKENS_FILE: '' });
    try {
      const file = join(sut.dir, 'admin.token');
      expect(statSync(file).mode & 0o777).toBe(0o600);
      const token = readFileSync(file, 'utf8').trim();
      expect(token.length).toBeGreaterThanOrEqual(32);
      expect((await sut.request('GET', '/admin/events', { token })).status).toBe(200);
      expect((await sut.request('GET', '/admin/events', { token: TOKENS.admin })).status).toBe(401);
    } finally {
      await sut.close();
    }
  });

  it('sends no CORS headers unless RUNLEDGER_CORS_ORIGIN is set', async () => {
    const closed = await bootApi();
    const open = await bootApi({ RUNLEDGER_CORS_ORIGIN: 'https://ops.example' });
    try {
      const preflight = {
        Origin: 'https://ops.example',
        'Access-Control-Request-Method': 'POST',
        'Access-Control-Request-Headers': 'authorization,content-type',
      };
      const a = await closed.request('OPTIONS', '/tasks', { token: null, headers: preflight });
      expect(a.headers.get('access-control-allow-origin')).toBeNull();
      const b = await open.request('OPTIONS', '/tasks', { token: null, headers: preflight });
      expect(b.headers.get('access-control-allow-origin')).toBe('https://ops.example');
      const other = await open.request('GET', '/health', {
        token: null,
        headers: { Origin: 'https://evil.example' },
      });
      expect(other.headers.get('access-control-allow-origin')).toBeNull();
    } finally {
      await closed.close();
      await open.close();
    }
  });
});
