import { isTerminalStatus } from '@runledger/contracts';
import { describePostgres, useTestPostgres, waitForSignalStep, writePlanScript } from '@runledger/testing';
import { ADMIN, ServerProcess, pgServerPair } from './permissions-server';
import { startReceiver } from './a2a-client';
// eslint-disable-next-line no-restricted-imports
import { verifySignature } from '../apps/controller/src/outbound/outbox';

/**
 * Signals through real server processes: a task waits for a named signal holding nothing, a signal
 * sent before the wait is kept and taken in order, a timeout has its own outcome, a SIGKILL while
 * waiting loses nothing, and concurrent senders (on two PostgreSQL instances too) record each
 * signal once and deliver one to the wait.
 */
jest.setTimeout(180_000);

const NAP_MS = 400;
const SIGNING_KEY = 'callback-signing-key-0123456789';
const TIMEOUT_MS = 2_500;

interface Ev {
  task_id: string;
  sequence: number;
  position: number;
  type: string;
  created_at: string;
  payload: Record<string, unknown>;
}

/** every task naps, then waits for signal `ci` (with a timeout), then answers */
function scriptIn(server: ServerProcess, timeoutMs = TIMEOUT_MS): void {
  const path = writePlanScript(server.dir, [
    { id: 'nap', kind: 'wait', args: { duration_ms: NAP_MS } },
    { ...waitForSignalStep('ci', { timeout_ms: timeoutMs }), depends_on: ['nap'] },
  ]);
  server.env.RUNLEDGER_MODEL = `scripted:${path}`;
}

const eventsOf = async (server: ServerProcess, taskId: string): Promise<Ev[]> =>
  (await server.request('GET', `/tasks/${taskId}/events?limit=1000`)).body.events as Ev[];

const submit = async (server: ServerProcess, input: string): Promise<string> => {
  const res = await server.request('POST', '/tasks', { input });
  expect(res.status).toBe(202);
  return res.body.task_id as string;
};

/** the task waits for its signal (the nap is over) */
async function untilWaitingForSignal(server: ServerProcess, id: string): Promise<void> {
  for (const deadline = Date.now() + 20_000; ;) {
    const t = (await server.request('GET', `/tasks/${id}`)).body;
    if (t.waiting_for?.kind === 'signal') return;
    if (Date.now() > deadline) throw new Error(`task ${id} never waited for its signal: ${t.status}`);
    await new Promise((r) => setTimeout(r, 30));
  }
}

/**
 * The signal ids concurrent sends recorded, sorted, checking each answer: a send is 202, recorded once
 * per id (one `created`, the repeats answered from the record), or 409 because the task ended when the
 * wait had taken an earlier signal before any copy of this id came in (then no copy was recorded).
 */
function recordedOnce(
  results: Array<{ status: number; body: Record<string, unknown> }>,
  sentIds: string[],
): string[] {
  const recorded = new Set<string>();
  results.forEach((r, i) => {
    if (r.status === 409) expect(r.body.message).toMatch(/already ended .* it takes no signals/);
    else expect(r.status).toBe(202);
    if (r.status === 202) recorded.add(sentIds[i]);
  });
  for (const id of recorded) {
    const answers = results.filter((_, i) => sentIds[i] === id);
    expect(answers.map((r) => r.status)).toEqual(answers.map(() => 202));
    expect(answers.filter((r) => r.body.created)).toHaveLength(1);
  }
  expect(recorded.size).toBeGreaterThan(0);
  return [...recorded].sort();
}

const signal = (server: ServerProcess, id: string, body: unknown, name = 'ci') =>
  server.request('POST', `/tasks/${id}/signals/${name}`, body);

/** the wait step's end: its output (the signal) or its error (timed out) */
function ciStep(events: Ev[]): Ev {
  const end = events.find(
    (e) => (e.type === 'STEP_COMPLETED' || e.type === 'STEP_FAILED') && e.payload.step_id === 'ci',
  );
  expect(end).toBeDefined();
  return end!;
}

function expectGapFree(events: Ev[]): void {
  expect(events.map((e) => e.sequence)).toEqual(events.map((_, k) => k + 1));
}

describe('signals on SQLite', () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = ServerProcess.create({
      LOG_LEVEL: 'warn',
      RUNLEDGER_MEMORY: 'off',
      RUNLEDGER_OUTBOUND_SIGNING_KEY: SIGNING_KEY,
      RUNLEDGER_OUTBOUND_BACKOFF_MS: '50',
    });
    scriptIn(server);
    await server.start();
  });
  afterAll(() => server.dispose());

  it('a waiting task is woken by its signal, which the step returns; a resend is recorded once', async () => {
    const id = await submit(server, 'wait for ci');
    await untilWaitingForSignal(server, id);
    const waiting = (await server.request('GET', `/tasks/${id}`)).body;
    expect(waiting.status).toBe('waiting');
    expect(waiting.waiting_for).toMatchObject({ kind: 'signal', name: 'ci' });
    expect(Date.parse(waiting.waiting_for.due_at)).toBeGreaterThan(Date.now());

    const sent = await signal(server, id, { payload: { build: 42, ok: true }, signal_id: 'ci-run-42' });
    expect(sent.status).toBe(202);
    expect(sent.body).toMatchObject({ signal_id: 'ci-run-42', name: 'ci', created: true });
    expect(sent.body.taken_by).toEqual(expect.any(String));
    const again = await signal(server, id, { payload: { build: 42, ok: true }, signal_id: 'ci-run-42' });
    expect(again.status).toBe(202);
    expect(again.body).toMatchObject({ created: false, taken_by: sent.body.taken_by });
    const other = await signal(server, id, { payload: { build: 43 }, signal_id: 'ci-run-42' });
    expect(other.status).toBe(409);
    expect(other.body.error).toBeDefined();

    const done = await server.waitFor(id, isTerminalStatus, 10_000);
    expect(done).toMatchObject({ status: 'completed', result: 'done' });
    const events = await eventsOf(server, id);
    expectGapFree(events);
    expect(events.filter((e) => e.type === 'SIGNAL_RECEIVED')).toHaveLength(1);
    expect(events.filter((e) => e.type === 'SIGNAL_DELIVERED')).toHaveLength(1);
    expect(ciStep(events)).toMatchObject({
      type: 'STEP_COMPLETED',
      payload: { output: { signal: 'ci', signal_id: 'ci-run-42', payload: { build: 42, ok: true } } },
    });
    // the timeout's timer never fired: the signal ended the wait
    expect(events.filter((e) => e.type === 'TIMER_FIRED')).toHaveLength(1);
    // an ended task takes no signal
    const late = await signal(server, id, { payload: 1 });
    expect(late.status).toBe(409);
  });

  it("signals sent before the wait are kept and taken in order, one per wait, in the wait's own commit", async () => {
    const id = await submit(server, 'signals come early');
    const first = await signal(server, id, { payload: 'first' });
    const second = await signal(server, id, { payload: 'second' });
    expect(first.body).toMatchObject({ created: true, taken_by: null });
    expect(second.body).toMatchObject({ created: true, taken_by: null });
    const done = await server.waitFor(id, isTerminalStatus, 10_000);
    expect(done.status).toBe('completed');
    const events = await eventsOf(server, id);
    expectGapFree(events);
    const awaited = events.find((e) => e.type === 'SIGNAL_AWAITED')!;
    const delivered = events.filter((e) => e.type === 'SIGNAL_DELIVERED');
    expect(delivered).toHaveLength(1);
    expect(delivered[0].payload.signal_id).toBe(first.body.signal_id);
    // taken at once: the delivery rides in the wait's commit (its timer between them), no waiting
    expect(delivered[0].sequence - awaited.sequence).toBeLessThanOrEqual(2);
    expect(ciStep(events).payload.output).toMatchObject({ payload: 'first' });
  });

  it('no signal: the wait times out as its own outcome, and the task goes on', async () => {
    const id = await submit(server, 'nobody signals');
    await untilWaitingForSignal(server, id);
    // a signal of another name is kept, and does not end this wait
    expect((await signal(server, id, { payload: 1 }, 'deploy')).body).toMatchObject({ taken_by: null });
    const done = await server.waitFor(id, isTerminalStatus, TIMEOUT_MS + 10_000);
    expect(done.status).toBe('completed');
    const events = await eventsOf(server, id);
    expect(ciStep(events)).toMatchObject({
      type: 'STEP_FAILED',
      payload: { error: expect.stringContaining(`timeout: no signal "ci" within ${TIMEOUT_MS} ms`) },
    });
    expect(events.filter((e) => e.type === 'SIGNAL_DELIVERED')).toEqual([]);
  });

  it('bad signals are refused with a JSON error and write nothing', async () => {
    const id = await submit(server, 'refusals');
    const before = (await eventsOf(server, id)).length;
    const badName = await signal(server, id, { payload: 1 }, '-nope');
    expect(badName.status).toBe(400);
    expect(badName.body).toMatchObject({ error: expect.any(String), message: expect.any(String) });
    expect((await signal(server, id, { payload: 1, extra: true })).status).toBe(400);
    expect((await signal(server, id, { payload: 'x'.repeat(70_000) })).status).toBe(400);
    expect((await signal(server, 'task_nope', { payload: 1 })).status).toBe(404);
    const events = await eventsOf(server, id);
    expect(events.filter((e) => e.type.startsWith('SIGNAL_RECEIVED'))).toEqual([]);
    expect(events.length).toBeGreaterThanOrEqual(before);
    await server.waitFor(id, isTerminalStatus, TIMEOUT_MS + 10_000);
  });

  it('concurrent senders: each signal id recorded once, one signal taken by the wait', async () => {
    const id = await submit(server, 'racing senders');
    await untilWaitingForSignal(server, id);
    const results = await Promise.all([
      signal(server, id, { payload: 'a', signal_id: 'sig-a' }),
      signal(server, id, { payload: 'a', signal_id: 'sig-a' }),
      signal(server, id, { payload: 'b', signal_id: 'sig-b' }),
      signal(server, id, { payload: 'b', signal_id: 'sig-b' }),
    ]);
    await server.waitFor(id, isTerminalStatus, 10_000);
    const events = await eventsOf(server, id);
    expectGapFree(events);
    expect(
      events
        .filter((e) => e.type === 'SIGNAL_RECEIVED')
        .map((e) => e.payload.signal_id)
        .sort(),
    ).toEqual(recordedOnce(results, ['sig-a', 'sig-a', 'sig-b', 'sig-b']));
    const delivered = events.filter((e) => e.type === 'SIGNAL_DELIVERED');
    expect(delivered).toHaveLength(1);
    // the first recorded is the one taken
    const firstReceived = events.find((e) => e.type === 'SIGNAL_RECEIVED')!;
    expect(delivered[0].payload.signal_id).toBe(firstReceived.payload.signal_id);
  });

  it('callback_url: every status change is POSTed, signed, retried after a failure, recorded; registered once per key', async () => {
    let calls = 0;
    const receiver = await startReceiver(() => (++calls === 1 ? 503 : 200));
    try {
      const tasksBefore = (await server.request('GET', '/tasks?limit=200')).body.tasks.length;
      const bad = [
        { input: 'x', callback_url: 'ftp://example.com/hook' },
        { input: 'x', callback_url: 'not a url' },
        { input: 'x', callback_token: 'orphan' },
      ];
      for (const body of bad) {
        const res = await server.request('POST', '/tasks', body);
        expect(res.status).toBe(400);
        expect(res.body).toMatchObject({ error: expect.any(String), message: expect.any(String) });
      }
      expect((await server.request('GET', '/tasks?limit=200')).body.tasks.length).toBe(tasksBefore);

      const body = { input: 'tell me when done', callback_url: receiver.url, callback_token: 'rcv-token' };
      const key = `cb-${Date.now()}`;
      const post = () => server.request('POST', '/tasks', body, ADMIN, { 'idempotency-key': key });
      const first = await post();
      expect(first.status).toBe(202);
      const id = first.body.task_id as string;
      expect((await post()).body.task_id).toBe(id);
      await untilWaitingForSignal(server, id);
      await signal(server, id, { payload: 'go' });
      await server.waitFor(id, isTerminalStatus, 10_000);
      const statusOf = (r: { body: string }) => (JSON.parse(r.body) as { status: string }).status;
      for (const deadline = Date.now() + 15_000; !receiver.taken.some((r) => statusOf(r) === 'completed');) {
        if (Date.now() > deadline)
          throw new Error(`no final callback: ${receiver.taken.map(statusOf).join(',')}`);
        await new Promise((r) => setTimeout(r, 25));
      }
      const bodies = receiver.taken.map((r) => JSON.parse(r.body) as Record<string, unknown>);
      for (const r of receiver.taken) {
        expect(verifySignature(SIGNING_KEY, r.body, r.headers['runledger-signature'] as string)).toBe(true);
        expect(
          verifySignature('another-key-0123456789', r.body, r.headers['runledger-signature'] as string),
        ).toBe(false);
        expect(r.headers['x-a2a-notification-token']).toBe('rcv-token');
        expect(r.headers['content-type']).toMatch(/^application\/json/);
      }
      // in order, each once, from the first status to the end, the waits included
      const seqs = bodies.map((b) => b.sequence as number);
      expect(seqs).toEqual([...new Set(seqs)].sort((x, y) => x - y));
      expect(bodies.map((b) => b.status)).toContain('waiting');
      expect(bodies[bodies.length - 1]).toMatchObject({ task_id: id, status: 'completed', result: 'done' });
      const outbound = (
        await server.request(
          'GET',
          `/admin/events?task_id=${encodeURIComponent(`outbound:${id}`)}&limit=1000`,
        )
      ).body.events as Ev[];
      const registered = outbound.filter((e) => e.type === 'CALLBACK_REGISTERED');
      expect(registered).toHaveLength(1);
      expect(registered[0].payload).toMatchObject({ format: 'runledger', url: receiver.url, from_seq: 0 });
      expect(outbound.some((e) => e.type === 'DELIVERY_FAILED')).toBe(true);
    } finally {
      await receiver.close();
    }
  });

  it('a task killed while it waits for a signal: its timeout fires once after the restart', async () => {
    const id = await submit(server, 'wait across a crash');
    await untilWaitingForSignal(server, id);
    const due = Date.parse((await server.request('GET', `/tasks/${id}`)).body.waiting_for.due_at as string);
    await server.kill();
    // down past the timeout: the new process finds the wait's timer in the log and fires it
    await new Promise((r) => setTimeout(r, Math.max(0, due - Date.now()) + 100));
    await server.start();
    const done = await server.waitFor(id, isTerminalStatus, 10_000);
    expect(done.status).toBe('completed');
    const events = await eventsOf(server, id);
    expectGapFree(events);
    expect(ciStep(events).type).toBe('STEP_FAILED');
    expect(events.filter((e) => e.type === 'TIMER_FIRED')).toHaveLength(2);
    expect(events.filter((e) => e.type === 'GUARD_TRIGGERED' && e.payload.guard === 'resumed')).toEqual([]);
  });
});

describePostgres('signals on PostgreSQL: two instances, senders on both', () => {
  const pg = useTestPostgres('rl_signals');
  let a: ServerProcess;
  let b: ServerProcess;
  const TASKS = 6;

  beforeEach(async () => {
    // a timeout long enough for every task to be waiting when the signals come
    [a, b] = await pgServerPair(pg, (first) => scriptIn(first, 60_000));
  });
  afterEach(async () => {
    await b.dispose();
    await a.dispose();
  });

  it('the same signals sent to both instances at once: each recorded once, each wait takes one', async () => {
    await Promise.all([a.start(), b.start()]);
    const ids: string[] = [];
    for (let i = 0; i < TASKS; i++) ids.push(await submit(i % 2 ? b : a, `task ${i}`));
    for (const id of ids) await untilWaitingForSignal(b, id);
    const sends = ids.flatMap((id) =>
      ['x', 'y'].flatMap((s) =>
        [a, b].map((server) => signal(server, id, { payload: s, signal_id: `${id}-${s}` })),
      ),
    );
    const sentIds = ids.flatMap((id) => ['x', 'y'].flatMap((s) => [`${id}-${s}`, `${id}-${s}`]));
    const results = await Promise.all(sends);
    const recorded = recordedOnce(results, sentIds);
    for (const id of ids) expect((await b.waitFor(id, isTerminalStatus, 20_000)).status).toBe('completed');
    for (const id of ids) {
      const events = await eventsOf(a, id);
      expectGapFree(events);
      expect(
        events
          .filter((e) => e.type === 'SIGNAL_RECEIVED')
          .map((e) => e.payload.signal_id)
          .sort(),
      ).toEqual(recorded.filter((s) => s.startsWith(`${id}-`)));
      expect(events.filter((e) => e.type === 'SIGNAL_DELIVERED')).toHaveLength(1);
      expect(events.filter((e) => e.type === 'TASK_COMPLETED')).toHaveLength(1);
    }
  });
});
