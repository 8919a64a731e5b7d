import { EventPayload, NewEvent, TaskStatus, emptyUsage } from '@runledger/contracts';
import { parseRetention } from '@runledger/state-store';
import { ArchivingStorage, describeArchivingStorages } from '@runledger/testing';
import { LogTaskViews, ProjectionTaskViews, TaskViews } from './task-views';

const at = (minute: number) => new Date(Date.parse('2026-03-01T00:00:00Z') + minute * 60_000).toISOString();

const received = (input: string, session_id: string, minute: number) =>
  ({ type: 'TASK_RECEIVED', payload: { input, session_id }, created_at: at(minute) }) as NewEvent;
const ended = (status: 'completed' | 'failed', minute: number) =>
  ({
    type: status === 'completed' ? 'TASK_COMPLETED' : 'TASK_FAILED',
    payload: {
      stop_reason: status === 'completed' ? 'completed' : 'tool_error',
      detail: status,
      result: status === 'completed' ? `answer at ${minute}` : null,
      usage: { ...emptyUsage(), total_tokens: minute, cost_usd: minute / 100 },
    } as EventPayload<'TASK_COMPLETED'>,
    created_at: at(minute + 1),
  }) as NewEvent;

/** [task, input, session, how it ends (null: still running)] */
const TASKS: [string, string, string, 'completed' | 'failed' | null][] = [
  ['t01', 'Deploy the API', 'ses_a', 'completed'],
  ['t02', 'raise coverage to 50%', 'ses_a', 'failed'],
  ['t03', 'deploy the WORKER', 'ses_b', 'completed'],
  ['t04', 'summarise the logs', 'ses_b', 'completed'],
  ['t05', 'rotate the keys', 'ses_c', null],
  ['t06', 'Deploy docs', 'ses_a', 'completed'],
  ['t07', 'tidy the tmp folder', 'ses_d', 'failed'],
  ['t08', 'deploy again', 'ses_d', 'completed'],
];

/** Everything a list reader can ask, as the pages it gets. */
async function everyRead(views: TaskViews) {
  const pages = async (query: { status?: TaskStatus; session_id?: string; q?: string }) => {
    const out: string[][] = [];
    let cursor: string | undefined;
    do {
      const page = await views.list({ ...query, limit: 2, cursor });
      out.push(
        page.tasks.map((t) => `${t.task_id}:${t.status}:${t.input_first_line}:${t.usage.total_tokens}`),
      );
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
    return out;
  };
  return {
    all: await pages({}),
    completed: await pages({ status: 'completed' }),
    failed: await pages({ status: 'failed' }),
    ses_a: await pages({ session_id: 'ses_a' }),
    deploy: await pages({ q: 'DEPLOY' }),
    deploy_d: await pages({ q: 'deploy', session_id: 'ses_d' }),
    session: (await views.sessionTasks('ses_a', 10)).map((t) => [t.task_id, t.status, t.input, t.result]),
    session_last: (await views.sessionTasks('ses_b', 1)).map((t) => t.task_id),
    counts: await views.countByStatus(),
    one: await views.get('t03'),
  };
}

describeArchivingStorages('task views over archived tasks', (open) => {
  let sut: ArchivingStorage;
  beforeEach(async () => {
    sut = await open();
    for (const [i, [id, input, session, end]] of TASKS.entries()) {
      const events = [received(input, session, i * 10)];
      if (end) events.push(ended(end, i * 10));
      await sut.storage.eventStore.append(id, events, { expected: 'no_stream' });
    }
  });
  afterEach(() => sut.dispose());

  it('lists archived tasks as it listed them live: pages, filters, session history and counts', async () => {
    const { storage } = sut;
    const log = new LogTaskViews(storage.eventStore, storage.checkpoints);
    const projection = new ProjectionTaskViews(storage.taskStates);
    const before = await everyRead(log);
    expect(before.all.flat().map((t) => t.split(':')[0])).toEqual(TASKS.map((t) => t[0]).reverse());
    expect(before.deploy.flat()).toHaveLength(4);

    const run = await sut.archive((a) => a.run(parseRetention('1d')!, Date.parse('2026-04-01T00:00:00Z')));
    // every finished task whose session has nothing running: all but ses_c's
    expect(new Set(run.tasks)).toEqual(new Set(['t01', 't02', 't03', 't04', 't06', 't07', 't08']));
    expect(await storage.eventStore.readAll({ types: ['TASK_RECEIVED'] })).toHaveLength(1);

    expect(await everyRead(log)).toEqual(before);
    // the projection's views (the server's) read the summary rows and answer the same
    const fromRows = await everyRead(projection);
    expect(fromRows.all).toEqual(before.all);
    expect(fromRows.deploy).toEqual(before.deploy);
    expect(fromRows.session).toEqual(before.session);

    // and once their records moved on into the archive's catalog (out of the live tables)
    const second = await sut.archive((a) =>
      a.run({ ...parseRetention('1d')!, catalog_after_ms: 0 }, Date.parse('2026-04-01T00:00:00Z')),
    );
    expect(second.catalogued.tasks).toBe(7);
    expect(await everyRead(log)).toEqual(before);
    const fromCatalog = await everyRead(projection);
    expect(fromCatalog).toEqual(fromRows);
  });

  it('reads the global log with archived events merged in position order, page by page', async () => {
    const { storage } = sut;
    const whole = await storage.eventStore.readAll({});
    await sut.archive((a) => a.run(parseRetention('1d')!, Date.parse('2026-04-01T00:00:00Z')));
    const pages = [];
    for (let after = 0; ;) {
      const page = await storage.eventStore.readAll({ after_position: after, limit: 3, archived: true });
      if (page.length === 0) break;
      pages.push(page.length);
      after = page[page.length - 1].position;
    }
    // the log again, and the archive's own record after it
    const merged = await storage.eventStore.readAll({ archived: true });
    expect(merged.slice(0, whole.length)).toEqual(whole);
    expect(merged.slice(whole.length).map((e) => e.type)).toEqual(['TASKS_ARCHIVED']);
    expect(pages.reduce((a, b) => a + b, 0)).toBe(merged.length);
    expect(pages.slice(0, -1).every((n) => n === 3)).toBe(true);
    expect(await storage.eventStore.readAll({ archived: true, types: ['TASK_COMPLETED'], limit: 2 })).toEqual(
      whole.filter((e) => e.type === 'TASK_COMPLETED').slice(0, 2),
    );
    expect(await storage.eventStore.readAll({ archived: true, task_id: 't03' })).toEqual(
      whole.filter((e) => e.task_id === 't03'),
    );
    expect(await storage.eventStore.readHeads({ archived: true, types: ['TASK_RECEIVED'] })).toHaveLength(8);
  });
});
