import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ApiHarness, bootApi } from './api-harness';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** Run redocly's linter on a file; offline, with no telemetry or update check (the machine has no internet). */
function redoclyLint(file: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    execFile(
      join(__dirname, '..', 'node_modules', '.bin', 'redocly'),
      ['lint', file],
      {
        timeout: 60_000,
        env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', CI: 'true' },
      },
      (err, stdout, stderr) =>
        resolve({
          code: err ? ((err as { code?: number }).code ?? null) : 0,
          output: `${stdout}\n${stderr}`,
        }),
    );
  });
}

/** Every `$ref` in the document, each with whether it points at something in it. */
function refs(doc: Json): Array<{ ref: string; resolves: boolean }> {
  const found: string[] = [];
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) node.forEach(walk);
    else if (node && typeof node === 'object')
      for (const [key, value] of Object.entries(node)) {
        if (key === '$ref' && typeof value === 'string') found.push(value);
        else walk(value);
      }
  };
  walk(doc);
  return found.map((ref) => ({
    ref,
    resolves:
      ref.startsWith('#/') &&
      ref
        .slice(2)
        .split('/')
        .reduce<unknown>(
          (at, part) => (at as Json | undefined)?.[part.replace(/~1/g, '/').replace(/~0/g, '~')],
          doc,
        ) !== undefined,
  }));
}

describe('API documents (e2e)', () => {
  let sut: ApiHarness;
  beforeAll(async () => {
    sut = await bootApi({}, { checkResponses: true });
  });
  afterAll(async () => {
    await sut.close();
  });

  it('serves the OpenAPI document without a token, and redocly lints it with no error', async () => {
    const res = await sut.request('GET', '/docs/openapi.json', { token: null });
    expect(res.status).toBe(200);
    const doc = res.body as Json;
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.servers).toEqual([expect.objectContaining({ url: '/' })]);
    const file = join(sut.dir, 'openapi.json');
    writeFileSync(file, res.text);
    const lint = await redoclyLint(file);
    expect(lint.output).not.toMatch(/\b[1-9]\d* errors?\b/);
    expect(lint.code).toBe(0);
  }, 90_000);

  it('documents every operation with an operationId, its scope and its error body', async () => {
    const doc = (await sut.request('GET', '/docs/openapi.json', { token: null })).body as Json;
    const operations = Object.entries(doc.paths as Json).flatMap(([path, ops]) =>
      Object.entries(ops as Json).map(([method, op]) => ({ name: `${method} ${path}`, op: op as Json })),
    );
    expect(operations.length).toBeGreaterThanOrEqual(13);
    const ids = operations.map(({ op }) => op.operationId);
    expect(ids.every((id) => typeof id === 'string' && id.length > 0)).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    const errorRef = { $ref: '#/components/schemas/ErrorResponseDto' };
    // a webhook delivery authenticates by its signature, not a token: open, yet it may be refused with 401
    const open = ['get /health', 'post /hooks/{name}'];
    for (const { name, op } of operations.filter(({ name }) => !open.includes(name))) {
      expect([name, op.security]).toEqual([name, [{ bearer: [op['x-required-scope']] }]]);
      expect([name, op.responses['401'].content['application/json'].schema]).toEqual([name, errorRef]);
    }
    const hook = doc.paths['/hooks/{name}'].post;
    expect(hook.security).toEqual([{}]);
    expect(hook.responses['401'].content['application/json'].schema).toEqual(errorRef);
    expect(doc.components.schemas.ErrorResponseDto.required).toEqual(['error', 'message', 'details']);
    expect(refs(doc).filter((r) => !r.resolves)).toEqual([]);
  });

  it('documents /health with the same object for 200 and 503, POST /tasks refusals with Retry-After, and the SSE stream as RuntimeEvents', async () => {
    const doc = (await sut.request('GET', '/docs/openapi.json', { token: null })).body as Json;
    const health = doc.paths['/health'].get;
    expect(health.security).toEqual([{}]);
    const healthSchema = health.responses['200'].content['application/json'].schema;
    expect(health.responses['503'].content['application/json'].schema).toEqual(healthSchema);
    const resolved = doc.components.schemas[healthSchema.$ref.split('/').pop()];
    expect(resolved.required).toEqual(['status', 'db', 'migrations', 'sandbox', 'memory', 'warnings']);
    expect(resolved.properties.status.enum).toEqual(['ok', 'degraded']);
    expect(JSON.stringify(resolved.properties.memory)).toContain('["ready","rebuilding"]');

    const submit = doc.paths['/tasks'].post;
    for (const status of ['429', '503']) {
      expect(submit.responses[status].headers['Retry-After'].schema).toEqual({ type: 'integer' });
      expect(submit.responses[status].content['application/json'].schema.$ref).toMatch(/ErrorResponseDto$/);
    }
    expect(submit.responses['503'].description).toMatch(/overloaded/);

    const stream = doc.paths['/tasks/{task_id}/stream'].get;
    const event = stream.responses['200'].content['text/event-stream'].schema;
    expect(doc.components.schemas[event.$ref.split('/').pop()].properties.sequence).toBeDefined();
    expect(stream.responses['204']).toBeDefined();
    const header = stream.parameters.find((p: Json) => p.name === 'Last-Event-ID');
    expect(header).toMatchObject({ in: 'header', schema: { pattern: '^\\d{1,15}$' } });
  });

  it('states the limits the server enforces', async () => {
    const doc = (await sut.request('GET', '/docs/openapi.json', { token: null })).body as Json;
    const param = (path: string, method: string, name: string) =>
      doc.paths[path][method].parameters.find((p: Json) => p.name === name);
    expect(param('/tasks', 'get', 'limit').schema).toMatchObject({
      type: 'integer',
      minimum: 1,
      maximum: 500,
    });
    expect(param('/tasks/{task_id}/events', 'get', 'limit').schema).toMatchObject({
      minimum: 1,
      maximum: 1000,
    });
    expect(param('/memory', 'get', 'k').schema).toMatchObject({ type: 'integer', minimum: 1, maximum: 100 });
    expect(param('/tasks/{task_id}/permissions/{request_id}', 'post', 'request_id')).toMatchObject({
      in: 'path',
      required: true,
      schema: { pattern: '^(?!\\.\\.?$)[A-Za-z0-9_.:-]{1,200}$' },
    });
    expect(param('/tasks', 'post', 'Idempotency-Key')).toMatchObject({
      in: 'header',
      schema: { pattern: '^[\\x21-\\x7e]{1,200}$' },
    });
    // the documented limit is the enforced one
    const over = await sut.request('GET', '/tasks?limit=501');
    expect(over.status).toBe(400);
    expect((await sut.request('GET', '/tasks?limit=500')).status).toBe(200);
  });

  it('serves Swagger UI at /docs without a token, with its assets', async () => {
    const page = await sut.request('GET', '/docs', { token: null });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toContain('text/html');
    expect(page.text).toContain('swagger-ui');
    // every script and stylesheet the page names, resolved as a browser does from /docs, is served
    const assets = [...page.text.matchAll(/(?:src|href)=["']([^"']+)["']/g)].map(
      ([, ref]) => new URL(ref, `${sut.url}/docs`),
    );
    expect(assets.map((u) => u.pathname)).toEqual(
      expect.arrayContaining(['/docs/swagger-ui-bundle.js', '/docs/swagger-ui-init.js']),
    );
    for (const asset of assets) {
      const res = await fetch(asset);
      await res.arrayBuffer(); // an unread body would hold the connection open past close()
      expect([asset.pathname, res.status]).toEqual([asset.pathname, 200]);
    }
    const init = await sut.request('GET', '/docs/swagger-ui-init.js', { token: null });
    expect(init.text).toContain('"operationId": "submitTask"');
  });

  it('serves the AsyncAPI 3.0 document of /ws without a token', async () => {
    const res = await sut.request('GET', '/docs/asyncapi.json', { token: null });
    expect(res.status).toBe(200);
    const doc = res.body as Json;
    expect(doc.asyncapi).toBe('3.0.0');
    expect(doc.channels.events.address).toBe('/ws');
    expect(Object.keys(doc.channels.events.messages).sort()).toEqual(
      [
        'auth',
        'subscribe',
        'subscribe_all',
        'unsubscribe',
        'ping',
        'authenticated',
        'subscribed',
        'archived',
        'unsubscribed',
        'event',
        'pong',
        'error',
      ].sort(),
    );
    expect(doc.channels.events['x-close-codes']).toMatchObject({
      4401: expect.any(String),
      4008: expect.any(String),
    });
    expect(doc.components.schemas.subscribe.properties.task_id.pattern).toBe(
      '^(?!\\.\\.?$)[A-Za-z0-9_.:-]{1,200}$',
    );
    expect(doc.components.schemas.event.properties.event).toEqual({
      $ref: '#/components/schemas/RuntimeEvent',
    });
    expect(refs(doc).filter((r) => !r.resolves)).toEqual([]);
  });

  it('answered every request above as the OpenAPI document describes it', () => {
    expect(sut.responseMismatches).toEqual([]);
  });
});
