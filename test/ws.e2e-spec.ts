import { NewEvent, emptyUsage, isFinalEventType } from '@runledger/contracts';
import { createSqliteStorage } from '@runledger/state-store';
import { ApiHarness, TOKENS, WsClient, bootApi, waitForTask } from './api-harness';

type Ev = { sequence: number; position: number; type: string; task_id: string };
const seqs = (events: Ev[]) => events.map((e) => e.sequence);
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe('WebSocket /ws (e2e, real ws client)', () => {
  let sut: ApiHarness;
  const clients: WsClient[] = [];
  const open = async (token: string = TOKENS.admin) => {
    const c = await WsClient.authed(sut.wsUrl, token);
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    // a socket that misses a heartbeat is dropped: the jest process is client and server at once, so
    // any pause of its event loop longer than the interval (GC, a busy CI machine) would drop a healthy
    // client. Only the test about dropping a silent peer runs with a short one, on a server of its own.
    sut = await bootApi({ RUNLEDGER_WS_HEARTBEAT_MS: '30000' }, { checkResponses: true });
  });
  afterEach(() => clients.splice(0).forEach((c) => c.close()));
  afterAll(async () => {
    await sut.close();
  });

  it('submit, watch live to the final event, then reconnect mid-stream and get exactly the missing events', async () => {
    const taskId = (
      await sut.request('POST', '/tasks', { body: { input: 'run echo live-one then run echo live-two' } })
    ).body.task_id;
    const watcher = await open();
    watcher.send({ type: 'subscribe', task_id: taskId, after_seq: 0, subscription_id: 'w' });
    await watcher.waitFor((m) => m.type === 'event' && isFinalEventType(m.event.type));
    const all: Ev[] = watcher.events('w');
    const n = all.length;
    expect(n).toBeGreaterThanOrEqual(4);
    expect(seqs(all)).toEqual(range(1, n));

    const k = Math.floor(n / 2);
    const resumed = await open();
    resumed.send({ type: 'subscribe', task_id: taskId, after_seq: k, subscription_id: 'r' });
    await resumed.waitFor((m) => m.type === 'event' && isFinalEventType(m.event.type));
    await new Promise((r) => setTimeout(r, 100));
    expect(seqs(resumed.events('r'))).toEqual(range(k + 1, n));
    expect(resumed.events('r')).toEqual(all.slice(k));
  });

  it('subscribe_all replays then continues live, in position order, no gap, no duplicate', async () => {
    const first = (
      await sut.request('POST', '/tasks', { body: { input: 'run echo before the subscription' } })
    ).body.task_id;
    await waitForTask(sut, first);
    const c = await open();
    c.send({ type: 'subscribe_all', after_position: 0, subscription_id: 'all' });
    const more = [];
    for (let i = 0; i < 3; i++)
      more.push(
        (await sut.request('POST', '/tasks', { body: { input: `run echo during ${i}` } })).body.task_id,
      );
    await Promise.all(more.map((id) => waitForTask(sut, id)));
    const head = (await sut.request('GET', '/admin/events?limit=1')).body.head_position;
    await c.waitFor((m) => m.type === 'event' && m.event.position === head);
    const positions = c.events('all').map((e: Ev) => e.position);
    expect(positions).toEqual(range(1, head));
    const log = [];
    for (let after = 0; ;) {
      const page = (await sut.request('GET', `/admin/events?after_position=${after}&limit=1000`)).body;
      log.push(...page.events);
      if (page.events.length < 1000) break;
      after = page.next_after_position;
    }
    expect(c.events('all')).toEqual(log);
  });

  it('carries several subscriptions per socket and stops one on unsubscribe', async () => {
    const a = (await sut.request('POST', '/tasks', { body: { input: 'run echo multi a' } })).body.task_id;
    const b = (await sut.request('POST', '/tasks', { body: { input: 'run echo multi b' } })).body.task_id;
    await Promise.all([waitForTask(sut, a), waitForTask(sut, b)]);
    const c = await open();
    c.send({ type: 'subscribe', task_id: a, after_seq: 0 });
    c.send({ type: 'subscribe', task_id: b, after_seq: 0 });
    const subA = await c.waitFor((m) => m.type === 'subscribed' && m.task_id === a);
    const subB = await c.waitFor((m) => m.type === 'subscribed' && m.task_id === b);
    expect(subA.subscription_id).not.toBe(subB.subscription_id);
    await c.waitFor(
      (m) =>
        m.type === 'event' && m.subscription_id === subA.subscription_id && isFinalEventType(m.event.type),
    );
    await c.waitFor(
      (m) =>
        m.type === 'event' && m.subscription_id === subB.subscription_id && isFinalEventType(m.event.type),
    );
    expect(c.events(subA.subscription_id).every((e: Ev) => e.task_id === a)).toBe(true);
    expect(c.events(subB.subscription_id).every((e: Ev) => e.task_id === b)).toBe(true);

    c.send({ type: 'subscribe_all', after_position: 1e9, subscription_id: 'tail' });
    await c.waitFor((m) => m.type === 'subscribed' && m.subscription_id === 'tail');
    c.send({ type: 'unsubscribe', subscription_id: 'tail' });
    await c.waitFor((m) => m.type === 'unsubscribed' && m.subscription_id === 'tail');
    const later = (await sut.request('POST', '/tasks', { body: { input: 'run echo after unsubscribe' } }))
      .body.task_id;
    await waitForTask(sut, later);
    c.send({ type: 'ping' });
    await c.waitFor((m) => m.type === 'pong');
    expect(c.events('tail')).toEqual([]);
  });

  it('handles messages in the order sent, even when they arrive in one packet', async () => {
    const taskId = (await sut.request('POST', '/tasks', { body: { input: 'run echo in order' } })).body
      .task_id;
    await waitForTask(sut, taskId);
    const c = await open();
    // one TCP write carrying three frames: the server sees them in one read
    const socket = (c.ws as unknown as { _socket: import('node:net').Socket })._socket;
    socket.cork();
    c.send({ type: 'subscribe', task_id: taskId, after_seq: 1e6, subscription_id: 'a' });
    c.send({ type: 'unsubscribe', subscription_id: 'a' });
    c.send({ type: 'ping' });
    socket.uncork();
    await c.waitFor((m) => m.type === 'pong');
    expect(c.messages.filter((m) => m.type !== 'authenticated').map((m) => m.type)).toEqual([
      'subscribed',
      'unsubscribed',
      'pong',
    ]);
  });

  it('answers bad messages with {type:"error"} and keeps the connection', async () => {
    const c = await open();
    const bad: unknown[] = [
      'not json',
      '[]',
      '42',
      { type: 'nope' },
      { type: 'subscribe' },
      { type: 'subscribe', task_id: 'x', after_seq: -1 },
      { type: 'subscribe', task_id: 'task_missing', after_seq: 0 },
      { type: 'unsubscribe', subscription_id: 'none' },
      { type: 'subscribe_all', after_position: 'a' },
      { type: 'auth', token: TOKENS.admin },
    ];
    for (const m of bad) c.send(m);
    c.send({ type: 'ping' });
    await c.waitFor((m) => m.type === 'pong');
    const errors = c.messages.filter((m) => m.type === 'error');
    expect(errors).toHaveLength(bad.length);
    for (const e of errors) {
      expect(Object.keys(e).sort()).toEqual(['details', 'error', 'message', 'type']);
      expect(typeof e.message).toBe('string');
    }
    expect(errors.map((e) => e.error)).toEqual(
      expect.arrayContaining(['validation_error', 'not_found', 'illegal_state']),
    );
  });

  it('answers a message over the size limit with an error and keeps the connection', async () => {
    const c = await open();
    c.send({ type: 'ping', pad: 'x'.repeat(70_000) });
    const error = await c.waitFor((m) => m.type === 'error');
    expect(error).toEqual({
      type: 'error',
      error: 'payload_too_large',
      message: expect.stringContaining('65536'),
      details: { max_bytes: 65_536 },
    });
    c.send({ type: 'ping' });
    await c.waitFor((m) => m.type === 'pong');
  });

  it('closes only the socket that sends a frame over 1 MiB (1009), logged as the client fault it is', async () => {
    const other = await open();
    const big = await open();
    big.send({ type: 'ping', pad: 'x'.repeat(1024 * 1024 + 1) });
    expect((await big.closed).code).toBe(1009);
    other.send({ type: 'ping' });
    await other.waitFor((m) => m.type === 'pong');
    const levels = sut.logs.map((l) => JSON.parse(l) as { level: number; msg: string });
    expect(levels.filter((l) => l.level >= 50)).toEqual([]);
  });

  it('tells connected clients the server is going away (1001) when it shuts down', async () => {
    const own = await bootApi();
    const c = await WsClient.authed(own.wsUrl, TOKENS.admin);
    await own.close();
    expect(await c.closed).toEqual({ code: 1001, reason: 'server shutting down' });
  });

  it('enforces auth: nothing before auth, a wrong token closes 4401, scopes apply', async () => {
    const anon = await WsClient.open(sut.wsUrl);
    clients.push(anon);
    anon.send({ type: 'subscribe_all', after_position: 0 });
    expect(await anon.waitFor((m) => m.type === 'error')).toMatchObject({ error: 'unauthorized' });
    anon.send({ type: 'auth', token: 'wrong-token-wrong-token' });
    expect(await anon.closed).toEqual({ code: 4401, reason: 'invalid token' });

    const reader = await open(TOKENS.reader);
    reader.send({ type: 'subscribe_all', after_position: 0 });
    expect(await reader.waitFor((m) => m.type === 'error')).toMatchObject({ error: 'forbidden' });
    expect(reader.messages.filter((m) => m.type === 'event')).toEqual([]);

    const viaHeader = await WsClient.open(sut.wsUrl, {
      headers: { authorization: `Bearer ${TOKENS.reader}` },
    });
    clients.push(viaHeader);
    viaHeader.send({ type: 'ping' });
    await viaHeader.waitFor((m) => m.type === 'pong');
    await expect(
      WsClient.open(sut.wsUrl, { headers: { authorization: 'Bearer nope-nope-nope-nope' } }),
    ).rejects.toThrow(/401/);
  });

  it('drops a peer that stops answering pings', async () => {
    const beating = await bootApi({ RUNLEDGER_WS_HEARTBEAT_MS: '150' }, { checkResponses: true });
    try {
      const mute = await WsClient.open(beating.wsUrl, { autoPong: false });
      clients.push(mute);
      mute.send({ type: 'auth', token: TOKENS.admin });
      const closed = await mute.closed;
      expect(closed.code).toBe(1006);
      const metrics = await beating.request('GET', '/metrics');
      expect(metrics.text).toMatch(/^runledger_ws_clients 0$/m);
      expect(beating.responseMismatches).toEqual([]);
    } finally {
      await beating.close();
    }
  });

  it('disconnects a slow consumer with 4008 without slowing a normal client', async () => {
    // ~25 MB of finished tasks, written before boot: far more than loopback socket buffers hold
    const seed = async (dbPath: string) => {
      const storage = await createSqliteStorage({ path: dbPath, synchronous: 'OFF' });
      try {
        for (let t = 0; t < 250; t++) {
          await storage.eventStore.append(
            `task_big_${t}`,
            [
              {
                type: 'TASK_RECEIVED',
                payload: { input: 'y'.repeat(100_000), session_id: 'sess_big' },
              } as NewEvent,
              {
                type: 'TASK_COMPLETED',
                payload: { stop_reason: 'completed', detail: 'seeded', usage: emptyUsage(), result: 'ok' },
              } as NewEvent,
            ],
            { expected: 'no_stream' },
          );
        }
      } finally {
        await storage.close();
      }
    };
    const slowSut = await bootApi(
      { RUNLEDGER_WS_MAX_BUFFER: '4194304', RUNLEDGER_WS_HEARTBEAT_MS: '2000' },
      { beforeBoot: seed, checkResponses: true },
    );
    try {
      const head = (await slowSut.request('GET', '/admin/events?limit=1')).body.head_position;
      expect(head).toBe(500);

      const slow = await WsClient.authed(slowSut.wsUrl, TOKENS.admin);
      const socket = (slow.ws as unknown as { _socket: { pause(): void } })._socket;
      socket.pause();
      slow.send({ type: 'subscribe_all', after_position: 0 });
      const normal = await WsClient.authed(slowSut.wsUrl, TOKENS.admin);
      normal.send({ type: 'subscribe_all', after_position: 0, subscription_id: 'n' });
      await normal.waitFor((m) => m.type === 'event' && m.event.position === head, 30_000);
      expect(normal.events('n').map((e: Ev) => e.position)).toEqual(range(1, head));

      const lines = () => slowSut.logs.map((l) => JSON.parse(l));
      const deadline = Date.now() + 10_000;
      while (!lines().some((l) => l.msg === 'ws slow consumer disconnected') && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 50));
      expect(lines()).toContainEqual(
        expect.objectContaining({ msg: 'ws slow consumer disconnected', client: 'admin' }),
      );
      (socket as unknown as { resume(): void }).resume();
      const closed = await slow.closed;
      expect([4008, 1006]).toContain(closed.code);
      normal.close();
      slow.close();
      expect(slowSut.responseMismatches).toEqual([]);
    } finally {
      await slowSut.close();
    }
  }, 90_000);

  it('answered every request above as the OpenAPI document describes it', () => {
    expect(sut.responseMismatches).toEqual([]);
  });
});
