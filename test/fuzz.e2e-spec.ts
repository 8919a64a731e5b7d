import { UserTask } from '@runledger/contracts';
import { ApiHarness, TOKENS, WsClient, bootApi, eventCount, waitForTask } from './api-harness';

/** Small seeded PRNG so a failure can be replayed. */
function rng(seed: number) {
  let s = seed >>> 0;
  const next = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)];
  return { next, int, pick };
}
type Rng = ReturnType<typeof rng>;

const NASTY = [
  '',
  ' ',
  '\u0000',
  '\ud800',
  '💥',
  '../../etc/passwd',
  '%00',
  '<script>',
  "'; DROP TABLE events;--",
  '__proto__',
  'constructor',
  'x'.repeat(5000),
  '-1',
  '1e309',
  'NaN',
  'null',
  'true',
  '[]',
  '{}',
];

function randomValue(r: Rng, depth = 0): unknown {
  switch (r.int(depth > 3 ? 5 : 8)) {
    case 0:
      return r.pick(NASTY);
    case 1:
      return r.pick([0, -1, 1.5, 1e308, -0, Number.MAX_SAFE_INTEGER + 2]);
    case 2:
      return r.pick([true, false, null]);
    case 3:
      return String.fromCharCode(...Array.from({ length: r.int(40) }, () => r.int(0xffff)));
    case 4:
      return r.int(1000);
    case 5:
      return Array.from({ length: r.int(4) }, () => randomValue(r, depth + 1));
    default: {
      const o: Record<string, unknown> = {};
      for (let i = r.int(5); i > 0; i--)
        o[
          r.pick([
            'input',
            'session_id',
            'budgets',
            'accept_checks',
            'decision',
            'secret',
            'type',
            '__proto__',
            'extra',
            r.pick(NASTY),
          ])
        ] = randomValue(r, depth + 1);
      return o;
    }
  }
}

function malformedTaskBody(r: Rng): { raw?: string; body?: unknown; headers?: Record<string, string> } {
  switch (r.int(6)) {
    case 0:
      return { raw: JSON.stringify(randomValue(r)).slice(0, r.int(60) + 1) + r.pick(['', '}', ',', '"']) };
    case 1:
      return {
        raw: String(randomValue(r)),
        headers: {
          'content-type': r.pick([
            'text/plain',
            'application/xml',
            'application/json; charset=utf-16',
            'multipart/form-data',
          ]),
        },
      };
    case 2:
      return {
        body: {
          input: 'valid input',
          [r.pick(['extra', 'status', 'task_id', '__proto__x'])]: randomValue(r),
        },
      };
    case 3:
      return { body: { input: randomValue(r), budgets: { max_rounds: r.pick([0, -5, 'ten', 1.5]) } } };
    case 4:
      return {
        body: { input: 'x', accept_checks: [{ id: r.pick(NASTY), kind: r.pick(['nope', 7, null]) }] },
      };
    default:
      return { body: randomValue(r) };
  }
}

/** percent-encode, lone surrogates included (encodeURIComponent throws on them) */
const safeEncode = (s: string) =>
  [...Buffer.from(s, 'utf8')].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');

const QUERY_KEYS = [
  'limit',
  'cursor',
  'status',
  'after_seq',
  'after_position',
  'type',
  'task_id',
  'session_id',
];
const MEMORY_QUERY_KEYS = ['query', 'kind', 'k', 'min_weight', 'session_id', 'task_id'];

const randomQuery = (r: Rng, keys: readonly string[] = QUERY_KEYS) =>
  Array.from(
    { length: r.int(4) + 1 },
    () =>
      `${safeEncode(r.pick([...keys, 'bogus', r.pick(NASTY)]))}=${r.pick([safeEncode(JSON.stringify(randomValue(r)) ?? ''), '%FF', '%', '-1', '99999999999999999999', 'a,b', ''])}`,
  ).join('&');

describe('fuzz: malformed input never causes a 5xx or a write (e2e)', () => {
  let sut: ApiHarness;
  let taskId: string;

  beforeAll(async () => {
    sut = await bootApi({ RUNLEDGER_BODY_LIMIT: '16kb' });
    taskId = (await sut.request('POST', '/tasks', { body: { input: 'fuzz anchor' } })).body.task_id;
    await waitForTask(sut, taskId);
  });
  afterAll(async () => {
    await sut.close();
  });

  it('sends 600+ malformed HTTP requests and WebSocket messages', async () => {
    const r = rng(0xc0ffee);
    const beforeEvents = await eventCount(sut);
    const beforeTasks = (await sut.request('GET', '/tasks?limit=500')).body.tasks.length;
    const statuses = new Map<number, number>();
    const seen: string[] = [];
    const send = async (method: string, path: string, options: Parameters<ApiHarness['request']>[2] = {}) => {
      const res = await sut.request(method, path, options);
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      if (res.status >= 500 || res.status < 400)
        seen.push(
          `${res.status} ${method} ${path} ${JSON.stringify(options).slice(0, 200)} -> ${res.text.slice(0, 200)}`,
        );
      else expect(Object.keys(res.body ?? {}).sort()).toEqual(['details', 'error', 'message']);
    };

    let httpCount = 0;
    for (let i = 0; i < 220; i++) {
      const body = malformedTaskBody(r);
      if (body.body !== undefined && UserTask.safeParse(body.body).success) continue;
      await send('POST', '/tasks', body);
      httpCount++;
    }
    await send('POST', '/tasks', { raw: JSON.stringify({ input: 'x'.repeat(20_000) }) });
    for (let i = 0; i < 120; i++) {
      const path = r.pick([
        `/tasks?${randomQuery(r)}`,
        `/tasks/${taskId}/events?${randomQuery(r)}`,
        `/admin/events?${randomQuery(r)}`,
        `/tasks/${taskId}/stream?${randomQuery(r)}`,
      ]);
      // only malformed queries count: skip the rare one that happens to be valid
      const probe = await sut.request('GET', path.replace('/stream?', '/events?'));
      if (probe.status < 400) continue;
      await send('GET', path);
      httpCount++;
    }
    for (let i = 0; i < 30; i++) {
      await send('GET', `/tasks/${taskId}/stream`, {
        headers: { 'Last-Event-ID': r.pick(['-1', 'abc', '1.5', '1e3', '99999999999999999', ' ']) },
      });
      httpCount++;
    }
    for (let i = 0; i < 80; i++) {
      const kind = r.pick(['permissions', 'secrets']);
      await send(
        'POST',
        `/tasks/${r.pick([taskId, 'task_nope', '%FF', safeEncode(String(r.pick(NASTY)) || 'x')])}/${kind}/${r.pick(['req_1', '%E0%A4%A', 'a'.repeat(300)])}`,
        {
          body: r.int(2)
            ? randomValue(r)
            : { decision: r.pick(['allow', 'yes', 1, null]), secret: randomValue(r) },
        },
      );
      httpCount++;
    }
    for (let i = 0; i < 60; i++) {
      const which = r.int(3);
      if (which === 0) {
        const path = `/memory?${randomQuery(r, MEMORY_QUERY_KEYS)}`;
        if ((await sut.request('GET', path)).status < 400) continue;
        await send('GET', path);
      } else if (which === 1) {
        const id = r.pick(['mem_nope', '%FF', safeEncode(String(r.pick(NASTY)) || 'x'), 'a'.repeat(300)]);
        await send('DELETE', `/memory/${id}`, r.int(2) ? {} : { body: randomValue(r) });
      } else {
        await send('POST', `/tasks/${taskId}/cancel`, {
          body: { [r.pick(['force', 'reason', 'x', r.pick(NASTY)])]: randomValue(r) },
        });
      }
      httpCount++;
    }
    for (let i = 0; i < 50; i++) {
      const method = r.pick(['GET', 'POST', 'PUT', 'DELETE', 'PATCH']);
      await send(
        method,
        r.pick([
          '/tasks/%FF',
          '/tasks/a/b/c/d',
          `/tasks/${'z'.repeat(300)}`,
          '/admin/nothing',
          '/%',
          `/tasks/${taskId}/cancel/x`,
          '/metrics/x',
        ]),
        method === 'GET' ? {} : { body: randomValue(r) },
      );
      httpCount++;
    }

    const ws = await WsClient.authed(sut.wsUrl, TOKENS.admin);
    let wsCount = 0;
    for (let i = 0; i < 170; i++) {
      const m = r.int(4);
      if (m === 0) ws.send(JSON.stringify(randomValue(r)).slice(0, r.int(80) + 1));
      else if (m === 1)
        ws.send({
          type: r.pick(['subscribe', 'subscribe_all', 'unsubscribe', 'auth', 'ping', 'x']),
          ...(randomValue(r) as object),
        });
      else if (m === 2)
        ws.send({
          type: 'subscribe',
          task_id: r.pick([taskId, 'task_nope', r.pick(NASTY)]),
          after_seq: r.pick([-1, 'a', 1.5, null]),
        });
      else ws.ws.send(Buffer.from(Array.from({ length: r.int(50) + 1 }, () => r.int(256))));
      wsCount++;
    }
    const mark = ws.messages.length;
    ws.send({ type: 'ping' });
    await ws.waitFor((m) => m.type === 'pong', 10_000, mark);
    const wsErrors = ws.messages.filter((m) => m.type === 'error');
    expect(wsErrors.every((e) => typeof e.error === 'string' && e.error !== 'internal_error')).toBe(true);
    ws.close();

    expect(seen).toEqual([]);
    expect(httpCount + wsCount).toBeGreaterThanOrEqual(500);
    expect([...statuses.keys()].every((s) => s >= 400 && s < 500)).toBe(true);
    expect(await eventCount(sut)).toBe(beforeEvents);
    expect((await sut.request('GET', '/tasks?limit=500')).body.tasks.length).toBe(beforeTasks);
    expect((await sut.request('GET', '/health', { token: null })).status).toBe(200);
    expect(sut.logs.map((l) => JSON.parse(l)).filter((l) => l.level >= 50)).toEqual([]);
  }, 120_000);
});
