import { connect } from 'node:net';
import { ApiHarness, TOKENS, bootApi, eventCount, waitForTask } from './api-harness';

describe('REST API (e2e over real HTTP)', () => {
  let sut: ApiHarness;

  beforeAll(async () => {
    sut = await bootApi({ RUNLEDGER_BODY_LIMIT: '64kb' }, { checkResponses: true });
  });
  afterAll(async () => {
    await sut.close();
  });

  it('serves /health without a token', async () => {
    const res = await sut.request('GET', '/health', { token: null });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'ok', db: 'reachable', migrations: 'current' });
    expect(res.body.warnings).toEqual(res.body.sandbox === 'process' ? [expect.any(String)] : []);
  });

  it('submits a task (202), runs it to completion and serves its state and events', async () => {
    const submitted = await sut.request('POST', '/tasks', {
      body: { input: 'run echo hello there', session_id: 'sess-1' },
    });
    expect(submitted.status).toBe(202);
    expect(submitted.body).toEqual({ task_id: expect.any(String), status: expect.any(String) });
    const taskId = submitted.body.task_id;

    const task = await waitForTask(sut, taskId);
    expect(task).toMatchObject({
      task_id: taskId,
      status: 'completed',
      stop_reason: 'completed',
      session_id: 'sess-1',
      pending: [],
    });
    expect(typeof task.result).toBe('string');

    const all = await sut.request('GET', `/tasks/${taskId}/events?limit=1000`);
    expect(all.status).toBe(200);
    const events = all.body.events;
    expect(events.map((e: { sequence: number }) => e.sequence)).toEqual(
      events.map((_: unknown, i: number) => i + 1),
    );
    expect(events[0]).toMatchObject({ type: 'TASK_RECEIVED', task_id: taskId, session_id: 'sess-1' });
    expect(events[events.length - 1].type).toBe('TASK_COMPLETED');
    expect(all.body.next_after_seq).toBe(events.length);
    expect(task.last_seq).toBe(events.length);

    const page = await sut.request('GET', `/tasks/${taskId}/events?after_seq=1&limit=2`);
    expect(page.body.events.map((e: { sequence: number }) => e.sequence)).toEqual([2, 3]);
    expect(page.body.next_after_seq).toBe(3);
  });

  it('honours Idempotency-Key: same key and body -> same task; different body -> 409, nothing written', async () => {
    const headers = { 'Idempotency-Key': 'key-abc-1' };
    const first = await sut.request('POST', '/tasks', { body: { input: 'idempotent one' }, headers });
    const again = await sut.request('POST', '/tasks', { body: { input: 'idempotent one' }, headers });
    expect(first.status).toBe(202);
    expect(again.status).toBe(202);
    expect(again.body.task_id).toBe(first.body.task_id);
    await waitForTask(sut, first.body.task_id);
    const before = await eventCount(sut);
    const conflict = await sut.request('POST', '/tasks', { body: { input: 'a different body' }, headers });
    expect(conflict.status).toBe(409);
    expect(conflict.body).toMatchObject({ error: 'idempotency_conflict', message: expect.any(String) });
    expect(await eventCount(sut)).toBe(before);
  });

  it('lists tasks with filters and cursor pagination, no task twice', async () => {
    const ids: string[] = [];
    for (const input of ['run echo list a', 'run echo list b', 'run echo list c']) {
      ids.push(
        (await sut.request('POST', '/tasks', { body: { input, session_id: 'list-sess' } })).body.task_id,
      );
    }
    await Promise.all(ids.map((id) => waitForTask(sut, id)));
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const q: string = `/tasks?session_id=list-sess&limit=2${cursor ? `&cursor=${cursor}` : ''}`;
      const res = await sut.request('GET', q);
      expect(res.status).toBe(200);
      expect(res.body.tasks.length).toBeLessThanOrEqual(2);
      seen.push(...res.body.tasks.map((t: { task_id: string }) => t.task_id));
      cursor = res.body.next_cursor;
      pages++;
    } while (cursor && pages < 10);
    expect([...seen].sort()).toEqual([...ids].sort());
    expect(pages).toBeGreaterThanOrEqual(2);

    const completed = await sut.request('GET', '/tasks?status=completed&session_id=list-sess');
    expect(completed.body.tasks).toHaveLength(3);
    const running = await sut.request('GET', '/tasks?status=running&session_id=list-sess');
    expect(running.body.tasks).toHaveLength(0);
  });

  it("shows each task with its input's first line and duration, and searches the input text", async () => {
    const input = '\n  Summarise the Q3 report\nthen mail it';
    const taskId = (await sut.request('POST', '/tasks', { body: { input, session_id: 'search-sess' } })).body
      .task_id as string;
    const other = (
      await sut.request('POST', '/tasks', { body: { input: 'run echo q3', session_id: 'search-sess' } })
    ).body.task_id as string;
    await Promise.all([waitForTask(sut, taskId), waitForTask(sut, other)]);
    const task = (await sut.request('GET', `/tasks/${taskId}`)).body;
    expect(task.input_first_line).toBe('Summarise the Q3 report');
    expect(task.duration_ms).toBe(Date.parse(task.updated_at) - Date.parse(task.created_at));
    const ids = async (q: string) =>
      (
        await sut.request('GET', `/tasks?session_id=search-sess&${new URLSearchParams({ q })}`)
      ).body.tasks.map((t: { task_id: string }) => t.task_id);
    expect(await ids('q3 REPORT')).toEqual([taskId]);
    expect(await ids('mail it')).toEqual([taskId]);
    expect((await ids('Q3')).sort()).toEqual([other, taskId].sort());
    expect(await ids('%')).toEqual([]);
    for (const q of ['', 'x'.repeat(201)]) {
      const res = await sut.request('GET', `/tasks?${new URLSearchParams({ q })}`);
      expect([res.status, res.body.error]).toEqual([400, 'validation_error']);
    }
  });

  it('serves chart figures to admins only: ended tasks per hour, usage per day, durations', async () => {
    const taskId = (await sut.request('POST', '/tasks', { body: { input: 'run echo stats' } })).body.task_id;
    const task = await waitForTask(sut, taskId);
    const stats = await sut.request('GET', '/admin/stats?days=1');
    expect(stats.status).toBe(200);
    expect(Date.parse(stats.body.until) - Date.parse(stats.body.since)).toBe(86_400_000);
    const hour = `${task.updated_at.slice(0, 13)}:00:00.000Z`;
    expect(stats.body.tasks_per_hour).toContainEqual({
      hour,
      stop_reason: task.stop_reason,
      tasks: expect.any(Number),
    });
    expect(stats.body.duration.tasks).toBeGreaterThanOrEqual(1);
    expect(stats.body.duration.p95_ms).toBeGreaterThanOrEqual(stats.body.duration.p50_ms);
    expect(Array.isArray(stats.body.usage_per_day)).toBe(true);
    expect((await sut.request('GET', '/admin/stats', { token: TOKENS.reader })).status).toBe(403);
    for (const q of ['days=0', 'days=91', 'days=x', 'bogus=1']) {
      const res = await sut.request('GET', `/admin/stats?${q}`);
      expect([q, res.status, res.body.error]).toEqual([q, 400, 'validation_error']);
    }
  });

  it('filters by any session id it accepted on submit', async () => {
    const session = 'team a/sprint #4 (ü)';
    const taskId = (
      await sut.request('POST', '/tasks', { body: { input: 'run echo s', session_id: session } })
    ).body.task_id as string;
    await waitForTask(sut, taskId);
    const q = new URLSearchParams({ session_id: session });
    const list = await sut.request('GET', `/tasks?${q}`);
    expect(list.status).toBe(200);
    expect(list.body.tasks.map((t: { task_id: string }) => t.task_id)).toEqual([taskId]);
    const memory = await sut.request('GET', `/memory?${q}`);
    expect(memory.status).toBe(200);
    expect(memory.body.entries.length).toBeGreaterThan(0);
    expect(memory.body.entries.every((e: { session_id: string }) => e.session_id === session)).toBe(true);
  });

  it('serves the global log with type, task and position filters', async () => {
    const taskId = (await sut.request('POST', '/tasks', { body: { input: 'for the admin log' } })).body
      .task_id;
    await waitForTask(sut, taskId);
    const received = await sut.request('GET', `/admin/events?type=TASK_RECEIVED&task_id=${taskId}`);
    expect(received.status).toBe(200);
    expect(received.body.events).toHaveLength(1);
    expect(received.body.events[0]).toMatchObject({ type: 'TASK_RECEIVED', task_id: taskId });
    const firstTwo = await sut.request('GET', '/admin/events?after_position=0&limit=2');
    expect(firstTwo.body.events.map((e: { position: number }) => e.position)).toEqual([1, 2]);
    const after = await sut.request('GET', `/admin/events?after_position=2&limit=1`);
    expect(after.body.events[0].position).toBe(3);
    expect(after.body.head_position).toBeGreaterThanOrEqual(3);
  });

  it('answers bad input with {error, message, details} and a 4xx, writing nothing', async () => {
    const before = await eventCount(sut);
    const cases: Array<
      [string, string, { body?: unknown; raw?: string; headers?: Record<string, string> }, number, string]
    > = [
      ['POST', '/tasks', { body: { input: 'x', extra: 1 } }, 400, 'validation_error'],
      ['POST', '/tasks', { body: { input: '' } }, 400, 'validation_error'],
      ['POST', '/tasks', { raw: '{"input": "x"' }, 400, 'validation_error'],
      ['POST', '/tasks', { raw: 'x'.repeat(70_000) }, 413, 'payload_too_large'],
      ['POST', '/tasks', { body: { input: 'x'.repeat(70_000) } }, 413, 'payload_too_large'],
      [
        'POST',
        '/tasks',
        { body: { input: 'x' }, headers: { 'Idempotency-Key': 'has space' } },
        400,
        'validation_error',
      ],
      ['GET', '/tasks?limit=0', {}, 400, 'validation_error'],
      ['GET', '/tasks?status=sleeping', {}, 400, 'validation_error'],
      ['GET', '/tasks?bogus=1', {}, 400, 'validation_error'],
      ['GET', '/tasks/task_does_not_exist', {}, 404, 'not_found'],
      ['GET', '/tasks/task_does_not_exist/events', {}, 404, 'not_found'],
      ['POST', '/tasks/task_does_not_exist/cancel', {}, 404, 'not_found'],
      ['GET', '/admin/events?type=NOT_A_TYPE', {}, 400, 'validation_error'],
      ['GET', '/admin/events?after_position=-1', {}, 400, 'validation_error'],
      ['GET', '/no/such/route', {}, 404, 'not_found'],
    ];
    for (const [method, path, options, status, error] of cases) {
      const res = await sut.request(method, path, options);
      expect({ method, path, status: res.status, error: res.body?.error }).toEqual({
        method,
        path,
        status,
        error,
      });
      expect(Object.keys(res.body).sort()).toEqual(['details', 'error', 'message']);
      expect(typeof res.body.message).toBe('string');
    }
    expect(await eventCount(sut)).toBe(before);
  });

  it('answers a method a path does not have with 405, the Allow header and the error body; unknown paths stay 404', async () => {
    const before = await eventCount(sut);
    const cases: Array<[string, string, string]> = [
      ['DELETE', '/tasks', 'GET, HEAD, POST'],
      ['PUT', '/tasks/task_x', 'GET, HEAD'],
      ['POST', '/tasks/task_x/events', 'GET, HEAD'],
      ['GET', '/tasks/task_x/cancel', 'POST'],
      ['PATCH', '/memory/mem_1', 'DELETE'],
      ['POST', '/health', 'GET, HEAD'],
      ['POST', '/docs/openapi.json', 'GET, HEAD'],
    ];
    for (const [method, path, allow] of cases) {
      const res = await sut.request(method, path, { body: method === 'GET' ? undefined : {} });
      expect({ method, path, status: res.status, allow: res.headers.get('allow'), body: res.body }).toEqual({
        method,
        path,
        status: 405,
        allow,
        body: {
          error: 'method_not_allowed',
          message: `${method} is not allowed on ${path}; allowed: ${allow}`,
          details: { allowed: allow.split(', ') },
        },
      });
    }
    for (const [method, path] of [
      ['DELETE', '/no/such/route'],
      ['GET', '/tasks/task_x/nothing'],
    ]) {
      const res = await sut.request(method, path);
      expect([method, path, res.status, res.body?.error, res.headers.get('allow')]).toEqual([
        method,
        path,
        404,
        'not_found',
        null,
      ]);
    }
    expect(await eventCount(sut)).toBe(before);
  });

  it('answers requests Node refuses before the app sees them (huge URL or headers, bad framing) with the JSON error body', async () => {
    const before = await eventCount(sut);
    const huge = await sut.request('GET', `/tasks?cursor=${'a'.repeat(20_000)}`);
    expect(huge.status).toBe(431);
    expect(huge.body).toEqual({ error: 'headers_too_large', message: expect.any(String), details: null });
    const headers = await sut.request('POST', '/tasks', {
      body: { input: 'run echo never' },
      headers: { 'x-padding': 'p'.repeat(20_000) },
    });
    expect([headers.status, headers.body?.error]).toEqual([431, 'headers_too_large']);
    const raw = await new Promise<string>((resolve, reject) => {
      const u = new URL(sut.url);
      const socket = connect(Number(u.port), u.hostname, () =>
        socket.write(
          'POST /tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\nhello',
        ),
      );
      let text = '';
      socket.on('data', (d) => (text += d.toString()));
      socket.on('end', () => resolve(text));
      socket.on('error', reject);
    });
    expect(raw).toMatch(/^HTTP\/1\.1 400 /);
    expect(raw).toContain('application/json');
    expect(JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4))).toEqual({
      error: 'bad_request',
      message: expect.any(String),
      details: null,
    });
    expect(await eventCount(sut)).toBe(before);
  });

  it('refuses a cancel that carries unknown fields and leaves the task as it was', async () => {
    const taskId = (await sut.request('POST', '/tasks', { body: { input: 'run touch cancel-me.txt' } })).body
      .task_id as string;
    await waitForTask(sut, taskId, (s) => s === 'awaiting_permission');
    const before = await eventCount(sut);
    for (const body of [{ force: true }, { reason: 'x' }, [1], 'now']) {
      const res = await sut.request('POST', `/tasks/${taskId}/cancel`, { body });
      expect([res.status, res.body.error]).toEqual([400, 'validation_error']);
    }
    expect(await eventCount(sut)).toBe(before);
    expect((await sut.request('GET', `/tasks/${taskId}`)).body.status).toBe('awaiting_permission');
    for (const options of [{}, { body: {} }]) {
      const res = await sut.request('POST', `/tasks/${taskId}/cancel`, options);
      expect(res.status === 202 || res.body.error === 'illegal_state').toBe(true);
    }
    expect((await waitForTask(sut, taskId)).status).toBe('cancelled');
  });

  it('serves Prometheus metrics and the OpenAPI document', async () => {
    const metrics = await sut.request('GET', '/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.headers.get('content-type')).toContain('text/plain');
    expect(metrics.text).toMatch(/^runledger_tasks\{status="completed"\} [1-9]\d*$/m);
    expect(metrics.text).toMatch(/^runledger_events_appended_total\{type="TASK_RECEIVED"\} [1-9]\d*$/m);
    // the exposition format leaves the order of labels free (prom-client writes le first)
    expect(
      metrics.text
        .split('\n')
        .filter((l) => l.startsWith('runledger_http_request_duration_seconds_bucket{'))
        .some(
          (l) =>
            ['method="POST"', 'route="/tasks"', 'status="202"', 'le="+Inf"'].every((label) =>
              l.includes(label),
            ) && /\} [1-9]\d*$/.test(l),
        ),
    ).toBe(true);
    expect(metrics.text).toContain('runledger_ws_clients 0');

    const doc = await sut.request('GET', '/docs/openapi.json', { token: null });
    expect(doc.status).toBe(200);
    expect(doc.body.openapi).toBe('3.1.0');
    expect(Object.keys(doc.body.paths)).toEqual(
      expect.arrayContaining([
        '/tasks',
        '/tasks/{task_id}',
        '/tasks/{task_id}/stream',
        '/admin/events',
        '/memory',
        '/memory/{id}',
      ]),
    );
    const body = doc.body.paths['/tasks'].post.requestBody.content['application/json'].schema;
    expect(doc.body.components.schemas[body.$ref.split('/').pop()].properties.input).toBeDefined();
    const page = await sut.request('GET', '/docs', { token: null });
    expect(page.status).toBe(200);
    expect(page.text).toContain('swagger-ui');
  });

  it('writes JSON request logs with task_id and correlation_id', async () => {
    const taskId = (
      await sut.request('POST', '/tasks', {
        body: { input: 'log me' },
        headers: { 'X-Correlation-Id': 'corr-42' },
      })
    ).body.task_id;
    await sut.request('GET', `/tasks/${taskId}`, { headers: { 'X-Correlation-Id': 'corr-43' } });
    const lines = sut.logs.map((l) => JSON.parse(l));
    expect(lines).toContainEqual(
      expect.objectContaining({
        msg: 'request',
        method: 'POST',
        status: 202,
        correlation_id: 'corr-42',
        client: 'admin',
      }),
    );
    expect(lines).toContainEqual(
      expect.objectContaining({ msg: 'request', method: 'GET', task_id: taskId, correlation_id: 'corr-43' }),
    );
  });

  it('refuses to cancel an ended task with 409 illegal_state', async () => {
    const taskId = (await sut.request('POST', '/tasks', { body: { input: 'run echo ended' } })).body.task_id;
    await waitForTask(sut, taskId);
    const res = await sut.request('POST', `/tasks/${taskId}/cancel`);
    expect(res.status).toBe(409);
    expect(res.body.error).toBe('illegal_state');
  });

  it('takes no dot segment for an id: /tasks/. and /tasks/.. are refused, never the task list', async () => {
    for (const [method, path] of [
      ['GET', '/tasks/.'],
      ['GET', '/tasks/..'],
      ['GET', '/tasks/../events'],
      ['POST', '/tasks/./cancel'],
    ]) {
      // a raw request line, as a client that sends the path as it is (curl --path-as-is) does
      const res = await rawRequest(sut.url, method, path);
      expect({ path, status: res.status }).toEqual({ path, status: 400 });
      expect(JSON.parse(res.body)).toMatchObject({ error: 'validation_error' });
    }
    const doc = (await sut.request('GET', '/docs/openapi.json', { token: null })).body;
    const taskId = doc.paths['/tasks/{task_id}'].get.parameters.find(
      (p: { name: string }) => p.name === 'task_id',
    );
    const pattern = new RegExp(taskId.schema.pattern);
    expect(['.', '..', 'task_1', 'a.b'].map((id) => pattern.test(id))).toEqual([false, false, true, true]);
  });

  it('answered every request above as the OpenAPI document describes it', () => {
    expect(sut.responseMismatches).toEqual([]);
  });
});

/** A request for a path exactly as written, without the dot-segment removal fetch and URL apply. */
function rawRequest(base: string, method: string, path: string): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () =>
      socket.write(
        `${method} ${path} HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${TOKENS.admin}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`,
      ),
    );
    let raw = '';
    socket.on('data', (c: Buffer) => (raw += c.toString('utf8')));
    socket.on('error', reject);
    socket.on('end', () => {
      const [head, ...rest] = raw.split('\r\n\r\n');
      resolve({ status: Number(head.split(' ')[1]), body: rest.join('\r\n\r\n') });
    });
  });
}
