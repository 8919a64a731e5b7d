import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describePostgres, useTestPostgres } from '@runledger/testing';
import { ServerProcess, pgServerPair } from './permissions-server';

/**
 * Schedules through real server processes: /schedules create, list, get, pause, resume, delete and
 * bad input; every slot of a cron expression with seconds fires once and starts the task its
 * idempotency key names; overlap skip; catch-up after downtime; two PostgreSQL instances, one killed
 * while slots fire: each slot decided once, one task per started slot.
 */
jest.setTimeout(240_000);

interface Ev {
  task_id: string;
  sequence: number;
  type: string;
  payload: Record<string, unknown>;
}

/** a slot every second: each wait below spans slots that would fire */
const EVERY_SECOND = '* * * * * *';
const SLOT_MS = 1000;

/** tasks answer at once unless their input asks them to wait for signal `go` */
function scriptIn(server: ServerProcess, wait: boolean): void {
  const path = join(server.dir, 'script.json');
  const respond = JSON.stringify({ type: 'respond', content: 'done' });
  const waitForGo = JSON.stringify({
    type: 'plan',
    steps: [{ id: 'go', kind: 'wait_for_signal', args: { name: 'go' } }],
  });
  writeFileSync(path, JSON.stringify({ orchestrator: wait ? [waitForGo, respond] : [respond] }));
  server.env.RUNLEDGER_MODEL = `scripted:${path}`;
}

const firings = async (server: ServerProcess, scheduleId: string): Promise<Ev[]> =>
  ((await server.request('GET', '/admin/events?type=SCHEDULE_FIRED&limit=1000')).body.events as Ev[]).filter(
    (e) => e.payload.schedule_id === scheduleId,
  );

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(
  what: string,
  probe: () => Promise<T | null | undefined | false>,
  ms = 20_000,
): Promise<T> {
  for (const deadline = Date.now() + ms; ;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

/** each slot decided once, and each started slot's task exists once, under its key */
async function expectOncePerSlot(server: ServerProcess, events: Ev[]): Promise<void> {
  const slots = events.map((e) => e.payload.slot as string);
  expect(new Set(slots).size).toBe(slots.length);
  for (const e of events.filter((f) => f.payload.outcome === 'started')) {
    const task = await server.request('GET', `/tasks/${e.payload.task_id as string}`);
    expect(task.status).toBe(200);
    const [received] = (await server.request('GET', `/tasks/${e.payload.task_id as string}/events?limit=1`))
      .body.events as Ev[];
    expect(received.payload).toMatchObject({
      source: 'schedule',
      idempotency_key: `schedule:${e.payload.schedule_id as string}:${e.payload.slot as string}`,
    });
  }
}

describe('schedules on SQLite', () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = ServerProcess.create({ LOG_LEVEL: 'warn', RUNLEDGER_MEMORY: 'off' });
    scriptIn(server, false);
    await server.start();
  });
  afterAll(() => server.dispose());

  it('bad input: 400 JSON and nothing written; an unknown schedule is 404', async () => {
    const before = (await server.request('GET', '/schedules')).body.schedules.length;
    for (const body of [
      { cron: '61 * * * *', input: 'x' },
      { cron: '* * * *', input: 'x' },
      { cron: '0 0 30 2 *', input: 'x' },
      { cron: '* * * * *', input: 'x', time_zone: 'Mars/Olympus' },
      { cron: '* * * * *', input: 'x', overlap: 'sometimes' },
      { cron: '* * * * *', input: '' },
      { cron: '* * * * *', input: 'x', extra: true },
    ]) {
      const res = await server.request('POST', '/schedules', body);
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ error: 'validation_error', message: expect.any(String) });
    }
    expect((await server.request('GET', '/schedules')).body.schedules).toHaveLength(before);
    expect((await server.request('GET', '/schedules/sched_nope')).status).toBe(404);
    expect((await server.request('GET', '/schedules/not an id')).status).toBe(400);
    expect((await server.request('DELETE', '/schedules/sched_nope')).status).toBe(404);
  });

  it('every slot fires once with its own task (input template filled in); pause stops it, resume and delete', async () => {
    const created = await server.request('POST', '/schedules', {
      name: 'pulse',
      cron: EVERY_SECOND,
      input: 'pulse at {{slot}}',
      overlap: 'allow',
    });
    expect(created.status).toBe(201);
    const id = created.body.schedule_id as string;
    expect(created.body).toMatchObject({
      cron: EVERY_SECOND,
      time_zone: 'UTC',
      paused: false,
      overlap: 'allow',
    });
    expect(Date.parse(created.body.next_slot)).toBeGreaterThan(Date.now() - 1000);

    const started = await until('three started slots', async () => {
      const f = (await firings(server, id)).filter((e) => e.payload.outcome === 'started');
      return f.length >= 3 && f;
    });
    await expectOncePerSlot(server, await firings(server, id));
    const first = started[0];
    const [received] = (
      await server.request('GET', `/tasks/${first.payload.task_id as string}/events?limit=1`)
    ).body.events as Ev[];
    expect(received.payload.input).toBe(`pulse at ${first.payload.slot as string}`);
    expect(Date.parse(first.payload.slot as string) % SLOT_MS).toBe(0);

    const paused = await server.request('POST', `/schedules/${id}/pause`);
    expect(paused.body).toMatchObject({ paused: true, next_slot: null });
    const count = (await firings(server, id)).length;
    await sleep(2.5 * SLOT_MS);
    expect((await firings(server, id)).length).toBe(count);
    const listed = (await server.request('GET', '/schedules')).body.schedules;
    const view = listed.find((s: { schedule_id: string }) => s.schedule_id === id);
    expect(view.paused).toBe(true);
    expect(view.tasks_started).toBeGreaterThanOrEqual(3);
    expect((await server.request('POST', `/schedules/${id}/resume`)).body.paused).toBe(false);
    expect((await server.request('DELETE', `/schedules/${id}`)).status).toBe(204);
    expect((await server.request('GET', `/schedules/${id}`)).status).toBe(404);
    const after = (await firings(server, id)).length;
    await sleep(1.5 * SLOT_MS);
    expect((await firings(server, id)).length).toBe(after);
  });

  it('after downtime: catch_up skip records the slots that passed as missed (no task); the next slots run again', async () => {
    const id = (
      await server.request('POST', '/schedules', {
        cron: EVERY_SECOND,
        input: 'tick',
        catch_up: 'skip',
        overlap: 'allow',
      })
    ).body.schedule_id as string;
    await until('a started slot', async () =>
      (await firings(server, id)).some((e) => e.payload.outcome === 'started'),
    );
    await server.stop();
    await sleep(2.5 * SLOT_MS);
    await server.start();
    const missed = await until('the missed slots', async () =>
      (await firings(server, id)).find((e) => e.payload.outcome === 'missed'),
    );
    expect(missed.payload.missed).toBeGreaterThanOrEqual(2);
    expect(missed.payload.task_id).toBeNull();
    await until('a slot started after the restart', async () =>
      (await firings(server, id)).some(
        (e) =>
          e.payload.outcome === 'started' &&
          Date.parse(e.payload.slot as string) > Date.parse(missed.payload.slot as string),
      ),
    );
    await expectOncePerSlot(server, await firings(server, id));
    await server.request('DELETE', `/schedules/${id}`);
  });
});

describe('schedules on SQLite: overlap', () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = ServerProcess.create({ LOG_LEVEL: 'warn', RUNLEDGER_MEMORY: 'off' });
    scriptIn(server, true);
    await server.start();
  });
  afterAll(() => server.dispose());

  it('overlap skip: while the task waits, later slots are skipped; once it ended the next slot starts', async () => {
    const id = (
      await server.request('POST', '/schedules', { cron: EVERY_SECOND, input: 'job', overlap: 'skip' })
    ).body.schedule_id as string;
    const first = await until('a started slot', async () =>
      (await firings(server, id)).find((e) => e.payload.outcome === 'started'),
    );
    await until(
      'two skipped slots',
      async () => (await firings(server, id)).filter((e) => e.payload.outcome === 'skipped').length >= 2,
    );
    const taskId = first.payload.task_id as string;
    await until(
      'the task waits for go',
      async () => (await server.request('GET', `/tasks/${taskId}`)).body.waiting_for,
    );
    expect((await server.request('POST', `/tasks/${taskId}/signals/go`, {})).status).toBe(202);
    await until(
      'a second started slot',
      async () => (await firings(server, id)).filter((e) => e.payload.outcome === 'started').length >= 2,
    );
    const all = await firings(server, id);
    await expectOncePerSlot(server, all);
    await server.request('DELETE', `/schedules/${id}`);
  });
});

describePostgres('schedules on PostgreSQL, two instances, one killed while slots fire', () => {
  const pg = useTestPostgres();
  let a: ServerProcess;
  let b: ServerProcess;
  beforeAll(async () => {
    [a, b] = await pgServerPair(pg, (first) => scriptIn(first, false));
    await Promise.all([a.start(), b.start()]);
  });
  afterAll(async () => {
    await Promise.all([a?.dispose(), b?.kill()]);
  });

  it('each slot is decided once and starts one task, across both instances and the kill', async () => {
    const id = (
      await a.request('POST', '/schedules', { cron: EVERY_SECOND, input: 'pg {{slot}}', overlap: 'allow' })
    ).body.schedule_id as string;
    await until(
      'two started slots',
      async () => (await firings(b, id)).filter((e) => e.payload.outcome === 'started').length >= 2,
    );
    await a.kill();
    const killedAt = Date.now();
    await until(
      'two slots after the kill',
      async () =>
        (await firings(b, id)).filter((e) => Date.parse(e.payload.slot as string) > killedAt).length >= 2,
    );
    await b.request('DELETE', `/schedules/${id}`);
    const all = await firings(b, id);
    expect(all.filter((e) => e.payload.outcome === 'started').length).toBeGreaterThanOrEqual(4);
    await expectOncePerSlot(b, all);
    // no slot between the first and the last was left undecided
    const slots = all.map((e) => Date.parse(e.payload.slot as string)).sort((x, y) => x - y);
    expect(slots.slice(1).map((s, i) => s - slots[i])).toEqual(slots.slice(1).map(() => SLOT_MS));
  });
});
