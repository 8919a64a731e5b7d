import * as fc from 'fast-check';
import { UserTask } from '@runledger/contracts';
import {
  ApiHarness,
  HttpResult,
  TOKENS,
  WsClient,
  WsMessage,
  bootApi,
  eventCount,
  waitForTask,
} from './api-harness';

/**
 * Malformed input as fast-check arbitraries. Each property runs with a fixed
 * seed, so a run is reproducible; a failure is shrunk to a smallest request
 * and reported with the seed and path that replay it.
 */
const SEED = 0xc0ffee;

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
] as const;
const nasty = fc.constantFrom(...NASTY);
const oddNumber = fc.constantFrom(0, -1, 1.5, 1e308, -0, Number.MAX_SAFE_INTEGER + 2);
/** UTF-16 code units, lone surrogates included (fast-check's own string units never make those) */
const codeUnits = fc.string({
  unit: fc.integer({ min: 0, max: 0xfffe }).map((c) => String.fromCharCode(c)),
  maxLength: 40,
});
const BODY_KEYS = [
  'input',
  'session_id',
  'budgets',
  'accept_checks',
  'decision',
  'secret',
  'type',
  '__proto__',
  'extra',
] as const;

/** Any JSON-ish value, nested at most 4 deep; objects use the keys our endpoints read, and nasty ones. */
const { value: anyValue } = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { maxDepth: 4, depthIdentifier: 'value' },
    nasty,
    oddNumber,
    fc.constantFrom(true, false, null),
    codeUnits,
    fc.nat(999),
    fc.array(tie('value'), { maxLength: 3 }),
    fc.dictionary(fc.oneof(fc.constantFrom(...BODY_KEYS), nasty), tie('value'), {
      maxKeys: 4,
      noNullPrototype: true,
    }),
  ),
}));
const json = (v: unknown): string => JSON.stringify(v) ?? '';

type RequestOptions = NonNullable<Parameters<ApiHarness['request']>[2]>;

/** A body POST /tasks would accept is no malformed input: it would (rightly) write a task. */
function isValidTask(req: RequestOptions): boolean {
  if (req.body !== undefined) return UserTask.safeParse(req.body).success;
  if (typeof req.raw !== 'string' || req.headers?.['content-type']) return false;
  try {
    return UserTask.safeParse(JSON.parse(req.raw)).success;
  } catch {
    return false;
  }
}

const malformedTaskBody: fc.Arbitrary<RequestOptions> = fc
  .oneof(
    // JSON cut short, sometimes with a stray closing character
    fc
      .record({ value: anyValue, cut: fc.nat(60), tail: fc.constantFrom('', '}', ',', '"') })
      .map(({ value, cut, tail }) => ({ raw: json(value).slice(0, cut + 1) + tail })),
    // a body in a content type the API does not take
    fc
      .record({
        value: anyValue,
        type: fc.constantFrom(
          'text/plain',
          'application/xml',
          'application/json; charset=utf-16',
          'multipart/form-data',
        ),
      })
      .map(({ value, type }) => ({ raw: String(value), headers: { 'content-type': type } })),
    // a valid task with a field it does not have
    fc
      .record({ key: fc.constantFrom('extra', 'status', 'task_id', '__proto__x'), value: anyValue })
      .map(({ key, value }) => ({ body: { input: 'valid input', [key]: value } })),
    // a bad budget
    fc
      .record({ input: anyValue, max_rounds: fc.constantFrom(0, -5, 'ten', 1.5) })
      .map(({ input, max_rounds }) => ({ body: { input, budgets: { max_rounds } } })),
    // a bad accept check
    fc
      .record({ id: nasty, kind: fc.constantFrom('nope', 7, null) })
      .map((check) => ({ body: { input: 'x', accept_checks: [check] } })),
    anyValue.map((body) => ({ body })),
  )
  .filter((req) => !isValidTask(req));

/** percent-encode, lone surrogates included (encodeURIComponent throws on them) */
const safeEncode = (s: string) =>
  [...Buffer.from(s, 'utf8')].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');
/** a path segment: the empty string would change the route, so it becomes 'x' */
const segment = nasty.map((s) => safeEncode(s || 'x'));

const QUERY_KEYS = [
  'limit',
  'cursor',
  'status',
  'after_seq',
  'after_position',
  'type',
  'task_id',
  'session_id',
] as const;
const MEMORY_QUERY_KEYS = ['query', 'kind', 'k', 'min_weight', 'session_id', 'task_id'] as const;

const query = (keys: readonly string[]) =>
  fc
    .array(
      fc.tuple(
        fc.oneof(fc.constantFrom(...keys, 'bogus'), nasty),
        fc.oneof(
          anyValue.map((v) => safeEncode(json(v))),
          fc.constantFrom('%FF', '%', '-1', '99999999999999999999', 'a,b', ''),
        ),
      ),
      { minLength: 1, maxLength: 4 },
    )
    .map((pairs) => pairs.map(([k, v]) => `${safeEncode(k)}=${v}`).join('&'));

/** Anything but an event sequence (1 to 15 digits), in characters a header can carry. */
const badLastEventId = fc
  .oneof(
    fc.constantFrom('-1', 'abc', '1.5', '1e3', '99999999999999999', ' '),
    fc.integer({ max: -1 }).map(String),
    fc.double({ noInteger: true }).map(String),
    fc.bigInt({ min: 10n ** 15n, max: 10n ** 30n }).map(String),
    fc.string({ unit: 'grapheme-ascii', maxLength: 20 }),
  )
  .filter((s) => !/^\d{1,15}$/.test(s.trim()));

type WsInput = { text: string } | { binary: Uint8Array };
const wsMessage = (taskId: string): fc.Arbitrary<WsInput> =>
  fc.oneof(
    // JSON cut short
    fc
      .record({ value: anyValue, cut: fc.nat(79) })
      .map(({ value, cut }) => ({ text: json(value).slice(0, cut + 1) })),
    // a known or unknown type with arbitrary fields (which may replace the type)
    fc
      .record({
        type: fc.constantFrom('subscribe', 'subscribe_all', 'unsubscribe', 'auth', 'ping', 'x'),
        rest: anyValue,
      })
      .map(({ type, rest }) => ({ text: json({ type, ...(rest as object) }) })),
    // a subscribe with a bad cursor
    fc
      .record({
        task_id: fc.oneof(fc.constantFrom(taskId, 'task_nope'), nasty),
        after_seq: fc.constantFrom(-1, 'a', 1.5, null),
      })
      .map((m) => ({ text: json({ type: 'subscribe', ...m }) })),
    // binary garbage
    fc.uint8Array({ minLength: 1, maxLength: 50 }).map((binary) => ({ binary })),
  );

describe('fuzz: malformed input never causes a 5xx or a write (e2e)', () => {
  let sut: ApiHarness;
  let taskId: string;
  let sent: number;
  const statuses = new Map<number, number>();

  /** Sends one malformed request; anything but a 4xx with the {error, message, details} body fails the property. */
  const refused = async (method: string, path: string, options: RequestOptions = {}): Promise<void> => {
    const res: HttpResult = await sut.request(method, path, options);
    sent++;
    statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    const shape = Object.keys((res.body as object | null) ?? {}).sort();
    if (res.status < 400 || res.status >= 500 || json(shape) !== json(['details', 'error', 'message']))
      throw new Error(`${method} ${path} answered ${res.status}: ${res.text.slice(0, 300)}`);
  };
  /** a GET that happens to be valid is no malformed input: the property skips it */
  const malformedGet = async (path: string): Promise<void> => {
    const probe = await sut.request('GET', path.replace('/stream?', '/events?'));
    fc.pre(probe.status >= 400);
    await refused('GET', path);
  };
  const check = <T>(arb: fc.Arbitrary<T>, numRuns: number, predicate: (t: T) => Promise<void>) =>
    fc.assert(fc.asyncProperty(arb, predicate), { seed: SEED, numRuns });

  beforeAll(async () => {
    sut = await bootApi({ RUNLEDGER_BODY_LIMIT: '16kb' }, { checkResponses: true });
    taskId = (await sut.request('POST', '/tasks', { body: { input: 'fuzz anchor' } })).body.task_id;
    await waitForTask(sut, taskId);
  });
  afterAll(async () => {
    await sut.close();
  });

  it('refuses 600+ malformed HTTP requests and WebSocket messages with a 4xx or an error message', async () => {
    const beforeEvents = await eventCount(sut);
    const beforeTasks = (await sut.request('GET', '/tasks?limit=500')).body.tasks.length;
    sent = 0;

    await check(malformedTaskBody, 220, (req) => refused('POST', '/tasks', req));
    await refused('POST', '/tasks', { raw: json({ input: 'x'.repeat(20_000) }) });

    const listing = fc
      .tuple(
        fc.constantFrom('/tasks', `/tasks/${taskId}/events`, '/admin/events', `/tasks/${taskId}/stream`),
        query(QUERY_KEYS),
      )
      .map(([path, q]) => `${path}?${q}`);
    await check(listing, 120, malformedGet);

    await check(badLastEventId, 30, (id) =>
      refused('GET', `/tasks/${taskId}/stream`, { headers: { 'Last-Event-ID': id } }),
    );

    const resolution = fc.record({
      task: fc.oneof(fc.constantFrom(taskId, 'task_nope', '%FF'), segment),
      kind: fc.constantFrom('permissions', 'secrets'),
      request: fc.constantFrom('req_1', '%E0%A4%A', 'a'.repeat(300)),
      body: fc.oneof(
        anyValue,
        fc.record({ decision: fc.constantFrom('allow', 'yes', 1, null), secret: anyValue }),
      ),
    });
    await check(resolution, 80, ({ task, kind, request, body }) =>
      refused('POST', `/tasks/${task}/${kind}/${request}`, { body }),
    );

    const memoryOrCancel = fc.oneof(
      query(MEMORY_QUERY_KEYS).map((q) => ({ kind: 'recall' as const, path: `/memory?${q}` })),
      fc.record({
        kind: fc.constant('delete' as const),
        id: fc.oneof(fc.constantFrom('mem_nope', '%FF', 'a'.repeat(300)), segment),
        body: fc.option(anyValue, { nil: undefined }),
      }),
      fc.record({
        kind: fc.constant('cancel' as const),
        key: fc.oneof(fc.constantFrom('force', 'reason', 'x'), nasty),
        value: anyValue,
      }),
    );
    await check(memoryOrCancel, 60, async (m) => {
      if (m.kind === 'recall') await malformedGet(m.path);
      else if (m.kind === 'delete')
        await refused('DELETE', `/memory/${m.id}`, m.body === undefined ? {} : { body: m.body });
      else await refused('POST', `/tasks/${taskId}/cancel`, { body: { [m.key]: m.value } });
    });

    const strayRoute = fc.record({
      method: fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH'),
      path: fc.constantFrom(
        '/tasks/%FF',
        '/tasks/a/b/c/d',
        `/tasks/${'z'.repeat(300)}`,
        '/admin/nothing',
        '/%',
        `/tasks/${taskId}/cancel/x`,
        '/metrics/x',
      ),
      body: anyValue,
    });
    await check(strayRoute, 50, ({ method, path, body }) =>
      refused(method, path, method === 'GET' ? {} : { body }),
    );

    // each message is followed by a ping: the pong proves the connection survived it and, since
    // messages are handled in order, that every error it caused has arrived
    const ws = await WsClient.authed(sut.wsUrl, TOKENS.admin);
    let wsSent = 0;
    await check(wsMessage(taskId), 170, async (m) => {
      const mark = ws.messages.length;
      if ('text' in m) ws.send(m.text);
      else ws.ws.send(Buffer.from(m.binary));
      wsSent++;
      ws.send({ type: 'ping' });
      await ws.waitFor((x) => x.type === 'pong', 10_000, mark);
      const bad = ws.messages
        .slice(mark)
        .filter(
          (x: WsMessage) =>
            x.type === 'error' && (typeof x.error !== 'string' || x.error === 'internal_error'),
        );
      if (bad.length > 0) throw new Error(`ws answered ${json(bad).slice(0, 300)}`);
    });
    ws.close();

    expect(sent + wsSent).toBeGreaterThanOrEqual(600);
    expect([...statuses.keys()].every((s) => s >= 400 && s < 500)).toBe(true);
    expect(await eventCount(sut)).toBe(beforeEvents);
    expect((await sut.request('GET', '/tasks?limit=500')).body.tasks.length).toBe(beforeTasks);
    expect((await sut.request('GET', '/health', { token: null })).status).toBe(200);
    expect(sut.logs.map((l) => JSON.parse(l)).filter((l) => l.level >= 50)).toEqual([]);
  }, 120_000);

  it('answered every request above as the OpenAPI document describes it', () => {
    expect(sut.responseMismatches).toEqual([]);
  });
});
