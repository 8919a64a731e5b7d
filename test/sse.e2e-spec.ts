import { ApiHarness, TOKENS, bootApi, parseSse, waitForTask } from './api-harness';

interface SseMessage {
  id: number;
  event: string;
  data: { sequence: number; type: string; task_id: string };
}

/** Read an SSE response to its end (the server ends it after the task's final event). */
async function readSse(
  url: string,
  headers: Record<string, string>,
): Promise<{ status: number; contentType: string | null; messages: SseMessage[] }> {
  const res = await fetch(url, { headers });
  const text = await res.text();
  const messages = parseSse(text).map((m) => ({
    id: Number(m.id),
    event: m.event,
    data: JSON.parse(m.data),
  }));
  return { status: res.status, contentType: res.headers.get('content-type'), messages };
}

describe('SSE /tasks/:task_id/stream (e2e)', () => {
  let sut: ApiHarness;
  beforeAll(async () => {
    sut = await bootApi({}, { checkResponses: true });
  });
  afterAll(async () => {
    await sut.close();
  });

  it('streams replay then live with id = sequence and ends after the final event; Last-Event-ID resumes', async () => {
    const taskId = (
      await sut.request('POST', '/tasks', { body: { input: 'run echo sse-one then run echo sse-two' } })
    ).body.task_id;
    const auth = { authorization: `Bearer ${TOKENS.reader}` };
    const full = await readSse(`${sut.url}/tasks/${taskId}/stream`, auth);
    expect(full.status).toBe(200);
    expect(full.contentType).toContain('text/event-stream');
    const n = full.messages.length;
    expect(n).toBeGreaterThanOrEqual(4);
    expect(full.messages.map((m) => m.id)).toEqual(Array.from({ length: n }, (_, i) => i + 1));
    expect(
      full.messages.every(
        (m) => m.data.sequence === m.id && m.event === m.data.type && m.data.task_id === taskId,
      ),
    ).toBe(true);
    expect(['TASK_COMPLETED', 'TASK_FAILED', 'TASK_CANCELLED']).toContain(full.messages[n - 1].event);

    const k = Math.floor(n / 2);
    const resumed = await readSse(`${sut.url}/tasks/${taskId}/stream`, {
      ...auth,
      'Last-Event-ID': String(k),
    });
    expect(resumed.messages).toEqual(full.messages.slice(k));

    const viaQuery = await readSse(`${sut.url}/tasks/${taskId}/stream?after_seq=${n - 1}`, auth);
    expect(viaQuery.messages.map((m) => m.id)).toEqual([n]);

    // an EventSource reconnects after the stream ends with the final id; 204 is what stops it
    const atEnd = await readSse(`${sut.url}/tasks/${taskId}/stream`, { ...auth, 'Last-Event-ID': String(n) });
    expect(atEnd.status).toBe(204);
    expect(atEnd.messages).toEqual([]);
    const pastEnd = await readSse(`${sut.url}/tasks/${taskId}/stream?after_seq=${n}`, auth);
    expect(pastEnd.status).toBe(204);
  });

  it('delivers live events to a stream opened before the task ends', async () => {
    const taskId = (await sut.request('POST', '/tasks', { body: { input: 'run echo hello from sse live' } }))
      .body.task_id;
    const stream = readSse(`${sut.url}/tasks/${taskId}/stream`, { authorization: `Bearer ${TOKENS.admin}` });
    await waitForTask(sut, taskId);
    const { messages } = await stream;
    const events = (await sut.request('GET', `/tasks/${taskId}/events?limit=1000`)).body.events;
    expect(messages.map((m) => m.data)).toEqual(events);
  });

  it('rejects a bad Last-Event-ID, an unknown task and a missing token with JSON errors', async () => {
    const taskId = (await sut.request('POST', '/tasks', { body: { input: 'hello' } })).body.task_id;
    const bad = await sut.request('GET', `/tasks/${taskId}/stream`, { headers: { 'Last-Event-ID': 'abc' } });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toBe('validation_error');
    expect((await sut.request('GET', '/tasks/task_nope/stream')).status).toBe(404);
    expect((await sut.request('GET', `/tasks/${taskId}/stream`, { token: null })).status).toBe(401);
  });

  it('logs and measures a stream the client closed before the task ended', async () => {
    const taskId = (await sut.request('POST', '/tasks', { body: { input: 'run touch sse-abort.txt' } })).body
      .task_id;
    await waitForTask(sut, taskId, (s) => s === 'awaiting_permission');
    const abort = new AbortController();
    const res = await fetch(`${sut.url}/tasks/${taskId}/stream`, {
      headers: { authorization: `Bearer ${TOKENS.admin}` },
      signal: abort.signal,
    });
    const reader = res.body!.getReader();
    await reader.read(); // the replay has started
    abort.abort();
    const logged = () =>
      sut.logs
        .map((l) => JSON.parse(l))
        .filter((l) => l.msg === 'request' && l.route === '/tasks/:task_id/stream' && l.task_id === taskId);
    for (let i = 0; i < 200 && logged().length === 0; i++) await new Promise((r) => setTimeout(r, 25));
    expect(logged()).toEqual([
      expect.objectContaining({ method: 'GET', status: 200, task_id: taskId, aborted: true }),
    ]);
    await sut.request('POST', `/tasks/${taskId}/cancel`);
  }, 15_000);

  it('ends open streams when the server shuts down', async () => {
    const other = await bootApi();
    const taskId = (
      await other.request('POST', '/tasks', { body: { input: 'run touch waits-for-approval.txt' } })
    ).body.task_id;
    await waitForTask(other, taskId, (s) => s === 'awaiting_permission');
    const stream = readSse(`${other.url}/tasks/${taskId}/stream`, {
      authorization: `Bearer ${TOKENS.admin}`,
    });
    await new Promise((r) => setTimeout(r, 200));
    const started = Date.now();
    await other.close();
    const { messages } = await stream;
    // the wait's checkpoint rides in the same append, after the request
    expect(messages.slice(-2).map((m) => m.event)).toEqual(['TASK_AWAITING_PERMISSION', 'CHECKPOINT_SAVED']);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('answered every request above as the OpenAPI document describes it', () => {
    expect(sut.responseMismatches).toEqual([]);
  });
});
