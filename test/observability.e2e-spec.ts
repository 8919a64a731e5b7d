import { ApiHarness, bootApi, TOKENS, waitForTask } from './api-harness';

/** the value of the sample `name{labels}`, whatever order the labels are written in; undefined when absent */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const line = text.split('\n').find((l) => {
    const [series] = l.split(' ');
    if (series !== name && !series.startsWith(`${name}{`)) return false;
    const written = series
      .slice(name.length)
      .replace(/^\{|\}$/g, '')
      .split(',')
      .filter(Boolean);
    return written.length === wanted.length && wanted.every((w) => written.includes(w));
  });
  return line === undefined ? undefined : Number(line.split(' ').at(-1));
}

describe('metrics and request logs (e2e)', () => {
  let sut: ApiHarness;
  beforeAll(async () => {
    sut = await bootApi({}, { checkResponses: true });
  });
  afterAll(() => sut.close());

  it('serves the process and Node.js metrics beside our own counters, gauges and request histogram', async () => {
    const taskId = (await sut.request('POST', '/tasks', { body: { input: 'run echo hello' } })).body.task_id;
    await waitForTask(sut, taskId);
    await sut.request('GET', '/no-such-route');

    const res = await sut.request('GET', '/metrics');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain;.*\bversion=0\.0\.4\b/);
    expect(sample(res.text, 'process_cpu_seconds_total')).toBeGreaterThan(0);
    expect(sample(res.text, 'nodejs_eventloop_lag_seconds')).toBeGreaterThanOrEqual(0);
    expect(sample(res.text, 'runledger_events_appended_total', { type: 'TASK_RECEIVED' })).toBe(1);
    expect(sample(res.text, 'runledger_events_appended_total', { type: 'TASK_COMPLETED' })).toBe(1);
    expect(sample(res.text, 'runledger_tasks', { status: 'completed' })).toBe(1);
    expect(sample(res.text, 'runledger_tasks', { status: 'failed' })).toBe(0);
    expect(sample(res.text, 'runledger_ws_clients')).toBe(0);
    const posted = { method: 'POST', route: '/tasks', status: '202' };
    expect(sample(res.text, 'runledger_http_request_duration_seconds_count', posted)).toBe(1);
    expect(sample(res.text, 'runledger_http_request_duration_seconds_sum', posted)).toBeGreaterThan(0);
    expect(
      sample(res.text, 'runledger_http_request_duration_seconds_bucket', { ...posted, le: '+Inf' }),
    ).toBe(1);
    // a path no controller serves is one series, not one per path
    expect(
      sample(res.text, 'runledger_http_request_duration_seconds_count', {
        method: 'GET',
        route: 'unmatched',
        status: '404',
      }),
    ).toBe(1);
    expect(res.text).not.toContain('no-such-route');
  });

  it('keeps the metrics and logs of two apps in one process apart', async () => {
    const other = await bootApi({}, { checkResponses: true });
    try {
      await other.request('POST', '/tasks', { body: { input: 'hello' } });
      const mine = (await sut.request('GET', '/metrics')).text;
      const theirs = (await other.request('GET', '/metrics')).text;
      expect(sample(theirs, 'runledger_events_appended_total', { type: 'TASK_RECEIVED' })).toBe(1);
      expect(sample(theirs, 'process_cpu_seconds_total')).toBeGreaterThan(0);
      expect(sample(mine, 'runledger_events_appended_total', { type: 'TASK_RECEIVED' })).toBe(1);
      // Nest's own messages of each app go to that app's log
      const started = (logs: string[]) =>
        logs.filter((l) => JSON.parse(l).msg === 'Nest application successfully started').length;
      expect([started(sut.logs), started(other.logs)]).toEqual([1, 1]);
      expect(other.responseMismatches).toEqual([]);
    } finally {
      await other.close();
    }
  });

  it('writes one request line with method, path without the query, route, status, duration and token name', async () => {
    const taskId = (await sut.request('POST', '/tasks', { body: { input: 'run echo hello' } })).body.task_id;
    const res = await sut.request('GET', `/tasks/${taskId}/events?after_seq=0&limit=5`, {
      token: TOKENS.reader,
      headers: { 'X-Correlation-Id': 'obs-1' },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-correlation-id')).toBe('obs-1');
    const lines = sut.logs.map((l) => JSON.parse(l)).filter((l) => l.correlation_id === 'obs-1');
    expect(lines).toEqual([
      {
        level: 30,
        time: expect.any(Number),
        service: 'runledger',
        msg: 'request',
        method: 'GET',
        path: `/tasks/${taskId}/events`,
        route: '/tasks/:task_id/events',
        status: 200,
        duration_ms: expect.any(Number),
        aborted: false,
        task_id: taskId,
        correlation_id: 'obs-1',
        client: 'reader',
      },
    ]);
    expect(lines[0].duration_ms).toBeGreaterThanOrEqual(0);
    expect(sut.logs.join('')).not.toContain(TOKENS.reader);
  });

  it('logs and measures a request whose body is refused (invalid JSON, too large) like any other', async () => {
    const before = sut.logs.length;
    const invalid = await sut.request('POST', '/tasks', { raw: '{"input": ' });
    const tooLarge = await sut.request('POST', '/tasks', {
      raw: JSON.stringify({ input: 'x'.repeat(2_000_000) }),
    });
    expect([invalid.status, tooLarge.status]).toEqual([400, 413]);
    const lines = sut.logs
      .slice(before)
      .map((l) => JSON.parse(l) as { msg?: string; method?: string; path?: string; status?: number })
      .filter((l) => l.msg === 'request' && l.method === 'POST' && l.path === '/tasks');
    expect(lines.map((l) => l.status).sort()).toEqual([400, 413]);
    const metrics = (await sut.request('GET', '/metrics')).text;
    for (const status of ['400', '413'])
      expect(
        sample(metrics, 'runledger_http_request_duration_seconds_count', {
          method: 'POST',
          route: 'unmatched',
          status,
        }),
      ).toBeGreaterThanOrEqual(1);
  });

  it('gives a request a correlation id of its own when the caller sent none or a malformed one', async () => {
    const res = await sut.request('GET', '/tasks', { headers: { 'X-Correlation-Id': 'bad id with spaces' } });
    const id = res.headers.get('x-correlation-id');
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(sut.logs.map((l) => JSON.parse(l))).toContainEqual(
      expect.objectContaining({ msg: 'request', correlation_id: id, path: '/tasks', status: 200 }),
    );
    expect(sut.logs.join('')).not.toContain('bad id with spaces');
  });

  it('logs a refused token as an anonymous 401', async () => {
    await sut.request('GET', '/tasks', {
      token: 'tok-not-a-real-one-000000000',
      headers: { 'X-Correlation-Id': 'obs-2' },
    });
    expect(sut.logs.map((l) => JSON.parse(l))).toContainEqual(
      expect.objectContaining({ msg: 'request', correlation_id: 'obs-2', status: 401, client: null }),
    );
    expect(sut.logs.join('')).not.toContain('tok-not-a-real-one');
  });

  it('answered every request above as the OpenAPI document describes it', () => {
    expect(sut.responseMismatches).toEqual([]);
  });
});
