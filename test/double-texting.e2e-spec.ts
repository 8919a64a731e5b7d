import Database from 'better-sqlite3';
import { isTerminalStatus } from '@runledger/contracts';
import { describePostgres, useTestPostgres, waitForSignalStep, writePlanScript } from '@runledger/testing';
import { ServerProcess, pgServerPair } from './permissions-server';

/**
 * Messages that arrive together (double-texting) through real server processes: a message for a
 * session whose task is unfinished is queued behind it (enqueue, the default), refused (reject),
 * or stops it (interrupt) or forgets it (rollback); the session's strategy is set with
 * PUT /sessions/:id and a request may name its own. Every task waits for a signal `go`, so which
 * task is unfinished is decided by the test, never by timing.
 */
jest.setTimeout(180_000);

interface Ev {
  task_id: string;
  sequence: number;
  position: number;
  type: string;
  payload: Record<string, unknown>;
}

/** every task waits for signal `go`, then answers `done` */
function scriptIn(server: ServerProcess): void {
  server.env.RUNLEDGER_MODEL = `scripted:${writePlanScript(server.dir, [waitForSignalStep('go')])}`;
}

const eventsOf = async (server: ServerProcess, taskId: string): Promise<Ev[]> =>
  (await server.request('GET', `/tasks/${taskId}/events?limit=1000`)).body.events as Ev[];

async function submit(server: ServerProcess, body: Record<string, unknown>): Promise<string> {
  const res = await server.request('POST', '/tasks', body);
  expect(res.status).toBe(202);
  return res.body.task_id as string;
}

async function untilWaitingFor(server: ServerProcess, id: string, kind: 'signal' | 'turn'): Promise<void> {
  for (const deadline = Date.now() + 20_000; ;) {
    const t = (await server.request('GET', `/tasks/${id}`)).body;
    if (t.waiting_for?.kind === kind) return;
    if (Date.now() > deadline) throw new Error(`task ${id} never waited for a ${kind}: ${t.status}`);
    await new Promise((r) => setTimeout(r, 30));
  }
}

const go = (server: ServerProcess, id: string) => server.request('POST', `/tasks/${id}/signals/go`, {});

const turnOf = (events: Ev[]) => events.find((e) => e.type === 'SESSION_TURN_BEGAN');

function suite(servers: () => [ServerProcess, ServerProcess]) {
  it('enqueue (default): the second message waits for its turn, then sees the first answer; reject refuses and writes nothing', async () => {
    const [a, b] = servers();
    const first = await submit(a, { input: 'first', session_id: 'chat-q' });
    await untilWaitingFor(a, first, 'signal');
    const second = await submit(b, { input: 'second', session_id: 'chat-q' });
    const queued = (await a.request('GET', `/tasks/${second}`)).body;
    expect(queued).toMatchObject({ status: 'queued', waiting_for: { kind: 'turn', after_task_id: first } });
    expect((await eventsOf(a, second)).map((e) => e.type)).toEqual(['TASK_RECEIVED']);

    const refused = await b.request('POST', '/tasks', {
      input: 'third',
      session_id: 'chat-q',
      on_busy: 'reject',
    });
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({
      error: 'session_busy',
      details: { session_id: 'chat-q', task_id: second },
    });
    expect(refused.body.message).toMatch(/unfinished task/);
    // the session's own strategy applies to a message that names none
    expect((await a.request('PUT', '/sessions/chat-q', { on_busy: 'reject' })).body).toEqual({
      session_id: 'chat-q',
      on_busy: 'reject',
    });
    expect((await b.request('POST', '/tasks', { input: 'fourth', session_id: 'chat-q' })).status).toBe(409);
    const session = (await b.request('GET', '/sessions/chat-q')).body;
    expect(session.on_busy).toBe('reject');
    expect(session.tasks.map((t: { task_id: string }) => t.task_id).sort()).toEqual([first, second].sort());

    expect((await go(b, first)).status).toBe(202);
    expect(await a.waitFor(first, isTerminalStatus, 15_000)).toMatchObject({ status: 'completed' });
    await untilWaitingFor(a, second, 'signal');
    const secondEvents = await eventsOf(a, second);
    expect(turnOf(secondEvents)?.payload).toEqual({
      after_task_id: first,
      session_history: [{ task_id: first, input: 'first', answer: 'done', stop_reason: 'completed' }],
    });
    // the second began only after the first ended
    const firstEvents = await eventsOf(a, first);
    expect(secondEvents[1].position).toBeGreaterThan(firstEvents[firstEvents.length - 1].position);
    await go(a, second);
    expect(await b.waitFor(second, isTerminalStatus, 15_000)).toMatchObject({ status: 'completed' });
  });

  it('interrupt: a waiting task is ended at once (interrupted) and the new one runs with it in its history', async () => {
    const [a, b] = servers();
    const first = await submit(a, { input: 'long job', session_id: 'chat-i' });
    await untilWaitingFor(a, first, 'signal');
    const second = await submit(b, {
      input: 'stop that, do this',
      session_id: 'chat-i',
      on_busy: 'interrupt',
    });
    expect(await a.waitFor(first, isTerminalStatus, 15_000)).toMatchObject({
      status: 'cancelled',
      stop_reason: 'interrupted',
    });
    const firstEvents = await eventsOf(a, first);
    expect(firstEvents.filter((e) => e.type === 'INTERRUPT_REQUESTED').map((e) => e.payload)).toEqual([
      { by_task_id: second },
    ]);
    await untilWaitingFor(b, second, 'signal');
    expect(turnOf(await eventsOf(b, second))?.payload.session_history).toEqual([
      { task_id: first, input: 'long job', answer: null, stop_reason: 'interrupted' },
    ]);
    await go(b, second);
    expect(await a.waitFor(second, isTerminalStatus, 15_000)).toMatchObject({ status: 'completed' });
  });

  it('rollback: the unfinished task is cancelled and no later task of the session is shown it', async () => {
    const [a, b] = servers();
    const kept = await submit(a, { input: 'kept', session_id: 'chat-r' });
    await untilWaitingFor(a, kept, 'signal');
    await go(a, kept);
    await a.waitFor(kept, isTerminalStatus, 15_000);
    const forgotten = await submit(a, { input: 'forget me', session_id: 'chat-r' });
    await untilWaitingFor(a, forgotten, 'signal');
    expect((await b.request('PUT', '/sessions/chat-r', { on_busy: 'rollback' })).status).toBe(200);
    const redo = await submit(b, { input: 'redo', session_id: 'chat-r' });
    expect(await a.waitFor(forgotten, isTerminalStatus, 15_000)).toMatchObject({
      status: 'cancelled',
      stop_reason: 'cancelled',
    });
    await untilWaitingFor(a, redo, 'signal');
    const keptTurn = { task_id: kept, input: 'kept', answer: 'done', stop_reason: 'completed' };
    expect(turnOf(await eventsOf(a, redo))?.payload.session_history).toEqual([keptTurn]);
    await go(a, redo);
    await a.waitFor(redo, isTerminalStatus, 15_000);
    // a message in the idle session runs at once and is shown the session without the rolled-back task
    const after = await submit(b, { input: 'after', session_id: 'chat-r' });
    const afterEvents = await eventsOf(b, after);
    expect(afterEvents[0].payload.session_history).toEqual([
      keptTurn,
      { task_id: redo, input: 'redo', answer: 'done', stop_reason: 'completed' },
    ]);
    expect(afterEvents[0].payload.queued_behind).toBeUndefined();
    const rolled = (await a.request('GET', '/admin/events?type=TASK_ROLLED_BACK&limit=100')).body
      .events as Ev[];
    expect(rolled.filter((e) => e.task_id === 'session:chat-r').map((e) => e.payload)).toEqual([
      { task_id: forgotten, by_task_id: redo },
    ]);
    await untilWaitingFor(a, after, 'signal');
    await go(a, after);
  });

  it('bad input: 400 JSON, nothing written', async () => {
    const [a] = servers();
    const bad = await a.request('POST', '/tasks', { input: 'x', session_id: 'chat-bad', on_busy: 'later' });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: 'validation_error' });
    const badPut = await a.request('PUT', '/sessions/chat-bad', { on_busy: 'sometimes' });
    expect(badPut.status).toBe(400);
    expect(badPut.body).toMatchObject({ error: 'validation_error', message: expect.any(String) });
    expect((await a.request('PUT', '/sessions/chat-bad', { on_busy: 'reject', extra: 1 })).status).toBe(400);
    expect((await a.request('GET', '/sessions/chat-bad')).status).toBe(404);
  });
}

describe('double-texting on SQLite', () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = ServerProcess.create({ LOG_LEVEL: 'warn', RUNLEDGER_MEMORY: 'off' });
    scriptIn(server);
    await server.start();
  });
  afterAll(() => server.dispose());
  suite(() => [server, server]);

  // a strategy cut short by a crash (SIGKILL) is applied by recovery
  /** the disk refuses events of `type` from now on, as if the process died just before writing one */
  const refuse = (type: string) => {
    const db = new Database(server.env.RUNLEDGER_DB);
    db.pragma('busy_timeout = 5000');
    db.exec(
      `CREATE TRIGGER refuse_${type} BEFORE INSERT ON events WHEN NEW.type = '${type}' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`,
    );
    db.close();
  };
  const accept = () => {
    const db = new Database(server.env.RUNLEDGER_DB);
    db.pragma('busy_timeout = 5000');
    for (const { name } of db
      .prepare("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'refuse_%'")
      .all() as { name: string }[])
      db.exec(`DROP TRIGGER ${name}`);
    db.close();
  };

  it('an interrupt and a rollback whose message was received before the kill take effect after the restart', async () => {
    const running = await submit(server, { input: 'long job', session_id: 'crash-i' });
    await untilWaitingFor(server, running, 'signal');
    const forgotten = await submit(server, { input: 'forget me', session_id: 'crash-r' });
    await untilWaitingFor(server, forgotten, 'signal');

    // each message is received (TASK_RECEIVED), then the process dies before its strategy is applied
    const cutShort = async (type: string, body: Record<string, unknown>) => {
      refuse(type);
      expect((await server.request('POST', '/tasks', body)).status).toBe(500);
    };
    await cutShort('INTERRUPT_REQUESTED', {
      input: 'stop that',
      session_id: 'crash-i',
      on_busy: 'interrupt',
    });
    await cutShort('TASK_CANCELLED', { input: 'redo', session_id: 'crash-r', on_busy: 'rollback' });
    await server.kill();
    accept();
    const sessionTask = (db: Database.Database, sessionId: string, input: string) =>
      (
        db
          .prepare(
            "SELECT task_id FROM events WHERE type = 'TASK_RECEIVED' AND session_id = ? AND payload LIKE ?",
          )
          .get(sessionId, `%"input":"${input}"%`) as { task_id: string }
      ).task_id;
    const db = new Database(server.env.RUNLEDGER_DB, { readonly: true });
    const interrupter = sessionTask(db, 'crash-i', 'stop that');
    const redo = sessionTask(db, 'crash-r', 'redo');
    const typesOf = (taskId: string) =>
      (
        db.prepare('SELECT type FROM events WHERE task_id = ? ORDER BY sequence').all(taskId) as {
          type: string;
        }[]
      ).map((r) => r.type);
    // what the kill left: the interrupt never recorded; the rollback recorded, the cancel not
    expect(typesOf(running)).not.toContain('INTERRUPT_REQUESTED');
    expect(typesOf(forgotten).at(-1)).toBe('SIGNAL_AWAITED');
    expect(typesOf(`session:crash-r`)).toEqual(['TASK_ROLLED_BACK']);
    db.close();

    await server.start();
    expect(await server.waitFor(running, isTerminalStatus, 15_000)).toMatchObject({
      status: 'cancelled',
      stop_reason: 'interrupted',
    });
    expect(await server.waitFor(forgotten, isTerminalStatus, 15_000)).toMatchObject({
      status: 'cancelled',
      stop_reason: 'cancelled',
    });
    await untilWaitingFor(server, interrupter, 'signal');
    expect(turnOf(await eventsOf(server, interrupter))?.payload.session_history).toEqual([
      { task_id: running, input: 'long job', answer: null, stop_reason: 'interrupted' },
    ]);
    await untilWaitingFor(server, redo, 'signal');
    expect(turnOf(await eventsOf(server, redo))?.payload.session_history).toEqual([]);
    // applied once: one interrupt, one rollback
    expect((await eventsOf(server, running)).filter((e) => e.type === 'INTERRUPT_REQUESTED')).toHaveLength(1);
    const rolled = (await server.request('GET', '/admin/events?type=TASK_ROLLED_BACK&limit=100')).body
      .events as Ev[];
    expect(rolled.filter((e) => e.task_id === 'session:crash-r')).toHaveLength(1);
  });
});

describePostgres('double-texting on PostgreSQL, two instances', () => {
  const pg = useTestPostgres();
  let a: ServerProcess;
  let b: ServerProcess;
  beforeAll(async () => {
    [a, b] = await pgServerPair(pg, scriptIn);
    await Promise.all([a.start(), b.start()]);
  });
  afterAll(async () => {
    await Promise.all([a?.dispose(), b?.kill()]);
  });
  suite(() => [a, b]);

  it('two messages to one idle session, one per instance at the same moment: exactly one begins, the other is refused or queued behind it', async () => {
    const sessions = Array.from({ length: 8 }, (_, i) => `chat-race-${i}`);
    const both = (session_id: string, on_busy: 'reject' | 'enqueue') =>
      Promise.all(
        [a, b].map((server) =>
          server.request('POST', '/tasks', { input: `to ${session_id}`, session_id, on_busy }),
        ),
      );
    const refusing = await Promise.all(sessions.map((id) => both(`${id}-reject`, 'reject')));
    for (const answers of refusing) expect(answers.map((r) => r.status).sort()).toEqual([202, 409]);

    const queueing = await Promise.all(sessions.map((id) => both(`${id}-enqueue`, 'enqueue')));
    for (const answers of queueing) {
      expect(answers.map((r) => r.status)).toEqual([202, 202]);
      const received = await Promise.all(
        answers.map(async (r) => (await eventsOf(a, r.body.task_id as string))[0].payload),
      );
      const behind = received.map((p) => p.queued_behind ?? null);
      // one was received into an idle session, the other behind it
      expect(behind.filter((x) => x === null)).toHaveLength(1);
      expect(behind).toContain(answers[behind.indexOf(null)].body.task_id);
    }
  });
});
