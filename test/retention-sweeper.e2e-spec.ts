import { createHmac } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { sql } from 'kysely';
import { catalogFile } from '@runledger/event-store';
import { describePostgres, useTestPostgres } from '@runledger/testing';
import { ApiHarness, TOKENS, WsClient, bootApi, waitForTask } from './api-harness';

/**
 * The server's own retention sweeper: with a policy set it archives finished task trees on its
 * interval, in batches, while tasks keep being submitted; every reader serves archived tasks as
 * before; a task waiting for a person never moves; the server shuts down cleanly mid-sweep.
 */
jest.setTimeout(60_000);

const sweeping = {
  RUNLEDGER_RETENTION: '1s',
  RUNLEDGER_RETENTION_SWEEP_MS: '100',
  RUNLEDGER_RETENTION_REST_MS: '5',
  RUNLEDGER_RETENTION_SWEEP_BATCH: '2',
  RUNLEDGER_MEMORY: 'off',
};

const HOOK_SECRET = 'sweep-hook-secret-0123456789';
/** a GitHub-style hook: a push starts a task, any other event is received and ignored */
const HOOK = {
  name: 'gh',
  secret_env: 'RL_TEST_SWEEP_HOOK_SECRET',
  signature: 'github',
  when: { 'headers.x-github-event': ['push'] },
  task: { input: 'list the files for {{body.ref}}' },
};

async function archivedTaskIds(h: ApiHarness): Promise<string[]> {
  const page = await h.request('GET', '/admin/events?after_position=0&limit=1000');
  expect(page.status).toBe(200);
  return (page.body.archived as { task_ids: string[] }[]).flatMap((r) => r.task_ids);
}

/** The ids of a table's rows whose id starts with `prefix`: the live `archived_tasks` or the catalog's. */
type ArchivedRowIds = (
  h: ApiHarness,
  table: 'archived_tasks' | 'catalog_archived_tasks',
  prefix: string,
) => Promise<string[]>;

function sweeperSpec(env: () => Promise<Record<string, string>>, archivedRowIds: ArchivedRowIds): void {
  let h: ApiHarness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  it('archives finished tasks on its interval while tasks run; reads stay the same; a waiting task stays', async () => {
    h = await bootApi({ ...sweeping, ...(await env()) });
    const server = h;
    const submit = async (input: string) => {
      const res = await server.request('POST', '/tasks', { body: { input } });
      expect(res.status).toBe(202);
      return res.body.task_id as string;
    };
    const waiting = await submit('run touch wait-for-me.txt');
    await waitForTask(server, waiting, (s) => s === 'awaiting_permission');
    const ids: string[] = [];
    const seen = new Map<string, { task: unknown; events: unknown }>();
    for (let i = 0; i < 5; i++) {
      const id = await submit(`list the files ${i}`);
      ids.push(id);
      const task = await waitForTask(server, id);
      seen.set(id, { task, events: (await server.request('GET', `/tasks/${id}/events?limit=1000`)).body });
    }
    for (const deadline = Date.now() + 20_000; ;) {
      const moved = await archivedTaskIds(server);
      if (ids.every((id) => moved.includes(id))) break;
      if (Date.now() > deadline) throw new Error(`sweeper archived ${moved.length} of ${ids.length}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const moved = await archivedTaskIds(server);
    expect(moved).not.toContain(waiting);
    expect(new Set(moved).size).toBe(moved.length);
    for (const id of ids) {
      const task = await server.request('GET', `/tasks/${id}`);
      const events = await server.request('GET', `/tasks/${id}/events?limit=1000`);
      expect([task.status, events.status]).toEqual([200, 200]);
      expect(task.body).toEqual(seen.get(id)!.task);
      expect(events.body).toEqual(seen.get(id)!.events);
    }
    // what it did is in the log, batch by batch (2 tasks at most each)
    const records = await server.request('GET', '/admin/events?type=TASKS_ARCHIVED&limit=1000');
    const batches = (records.body.events as { payload: { task_ids: string[]; reason: string } }[]).map(
      (e) => e.payload,
    );
    expect(batches.length).toBeGreaterThanOrEqual(3);
    for (const b of batches) expect([b.task_ids.length <= 2, b.reason]).toEqual([true, 'policy']);
    // the waiting task is still live and resumes
    const allowed = await server.request('GET', `/tasks/${waiting}`);
    expect(allowed.body.status).toBe('awaiting_permission');
    const fresh = await submit('list the files');
    // answered as the tasks before the sweep were
    const ended = await waitForTask(server, fresh);
    const earlier = seen.get(ids[0])!.task as { status: string; stop_reason: string };
    expect([ended.status, ended.stop_reason]).toEqual([earlier.status, earlier.stop_reason]);
  });

  it('readers of the global log page past archived stretches and are told every one (HTTP and WebSocket)', async () => {
    h = await bootApi({ ...sweeping, ...(await env()) });
    const server = h;
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const res = await server.request('POST', '/tasks', { body: { input: `list the files ${i}` } });
      ids.push(res.body.task_id as string);
      await waitForTask(server, ids[i]);
    }
    for (const deadline = Date.now() + 20_000; ;) {
      const moved = await archivedTaskIds(server);
      if (ids.every((id) => moved.includes(id))) break;
      if (Date.now() > deadline) throw new Error(`sweeper archived ${moved.length} of ${ids.length}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    type Page = {
      events: { position: number; task_id: string }[];
      next_after_position: number;
      head_position: number;
      archived: { first_position: number; task_ids: string[] }[];
    };
    const pageThrough = async (query: string): Promise<Page[]> => {
      const pages: Page[] = [];
      for (let after = 0; ;) {
        const res = await server.request('GET', `/admin/events?after_position=${after}&${query}`);
        expect(res.status).toBe(200);
        const page = res.body as Page;
        pages.push(page);
        if (page.next_after_position >= page.head_position) return pages;
        expect(page.next_after_position).toBeGreaterThan(after);
        after = page.next_after_position;
      }
    };
    // every task's end is archived: one page, the cursor at the head, every range told
    const ends = await pageThrough('type=TASK_COMPLETED,TASK_FAILED&limit=2');
    expect(ends).toHaveLength(1);
    expect(ends[0].events).toEqual([]);
    expect(ends[0].next_after_position).toBe(ends[0].head_position);
    expect(ends[0].archived.flatMap((r) => r.task_ids)).toEqual(expect.arrayContaining(ids));
    // the whole log in small pages: live events and the archived tasks' own events cover every position once
    const pages = await pageThrough('limit=3');
    const head = pages.at(-1)!.head_position;
    const positions = pages.flatMap((p) => p.events.map((e) => e.position));
    const told = new Set(pages.flatMap((p) => p.archived.flatMap((r) => r.task_ids)));
    expect([...told].sort()).toEqual([...ids].sort());
    for (const id of told) {
      const events = await server.request('GET', `/tasks/${id}/events?limit=1000`);
      positions.push(...(events.body.events as { position: number }[]).map((e) => e.position));
    }
    expect(positions.sort((a, b) => a - b)).toEqual(Array.from({ length: head }, (_, i) => i + 1));
    // a WebSocket subscriber is told the head and the archived stretches before it
    const ws = await WsClient.authed(server.wsUrl, TOKENS.admin);
    try {
      ws.send({ type: 'subscribe_all', after_position: 0, types: ['TASK_COMPLETED', 'TASK_FAILED'] });
      const subscribed = await ws.waitFor((m) => m.type === 'subscribed');
      expect(subscribed.head_position).toBeGreaterThanOrEqual(head);
      expect(subscribed.archived_through).toBe(subscribed.head_position);
      expect((subscribed.archived as { task_ids: string[] }[]).flatMap((r) => r.task_ids)).toEqual(
        expect.arrayContaining(ids),
      );
    } finally {
      ws.close();
    }
  });

  it('a live subscribe_all is told each stretch archived while it runs, and can tell it already has its events', async () => {
    h = await bootApi({ ...sweeping, ...(await env()) });
    const server = h;
    const ws = await WsClient.authed(server.wsUrl, TOKENS.admin);
    try {
      ws.send({
        type: 'subscribe_all',
        subscription_id: 'ends',
        after_position: 0,
        types: ['TASK_COMPLETED', 'TASK_FAILED'],
      });
      const subscribed = await ws.waitFor((m) => m.type === 'subscribed');
      expect(subscribed.archived).toBeUndefined();
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const res = await server.request('POST', '/tasks', { body: { input: `list the files ${i}` } });
        ids.push(res.body.task_id as string);
        await waitForTask(server, ids[i]);
      }
      type Range = { segment_id: string; first_position: number; last_position: number; task_ids: string[] };
      const told = () =>
        ws.messages.filter((m) => m.type === 'archived') as unknown as {
          subscription_id: string;
          position: number;
          archived: Range[];
        }[];
      for (const deadline = Date.now() + 20_000; ;) {
        const tasks = told().flatMap((m) => m.archived.flatMap((r) => r.task_ids));
        if (ids.every((id) => tasks.includes(id))) break;
        if (Date.now() > deadline) throw new Error(`told ${tasks.length} of ${ids.length} archived tasks`);
        await new Promise((r) => setTimeout(r, 50));
      }
      // each message names the TASKS_ARCHIVED that recorded its batch, and the segment's range as /admin/events tells it
      const records = await server.request('GET', '/admin/events?type=TASKS_ARCHIVED&limit=1000');
      const recorded = new Map(
        (records.body.events as { position: number; payload: { segment_id: string } }[]).map((e) => [
          e.payload.segment_id,
          e.position,
        ]),
      );
      const page = await server.request('GET', '/admin/events?after_position=0&limit=1000');
      const ranges = new Map((page.body.archived as Range[]).map((r) => [r.segment_id, r]));
      for (const m of told()) {
        expect(m.subscription_id).toBe('ends');
        for (const r of m.archived) {
          expect(m.position).toBe(recorded.get(r.segment_id));
          expect(r).toEqual(ranges.get(r.segment_id));
        }
      }
      // every task ended before its batch was archived: the subscriber holds each end, inside the range told
      const ends = ws.messages.filter((m) => m.type === 'event') as unknown as {
        event: { task_id: string; position: number };
      }[];
      for (const id of ids) {
        const range = told()
          .flatMap((m) => m.archived)
          .find((r) => r.task_ids.includes(id))!;
        const end = ends.find((e) => e.event.task_id === id);
        if (!end) throw new Error(`no end of ${id} among ${JSON.stringify(ws.messages.map((m) => m.type))}`);
        expect(end.event.position).toBeGreaterThanOrEqual(range.first_position);
        expect(end.event.position).toBeLessThanOrEqual(range.last_position);
      }
      const last = Math.max(...ends.map((e) => e.event.position));
      const highest = Math.max(...told().flatMap((m) => m.archived.map((r) => r.last_position)));
      expect(last).toBeGreaterThanOrEqual(highest);
      // a subscription that stopped is told nothing more
      ws.send({ type: 'unsubscribe', subscription_id: 'ends' });
      await ws.waitFor((m) => m.type === 'unsubscribed');
      const count = told().length;
      const more = await server.request('POST', '/tasks', { body: { input: 'list the files again' } });
      await waitForTask(server, more.body.task_id as string);
      for (
        const deadline = Date.now() + 20_000;
        !(await archivedTaskIds(server)).includes(more.body.task_id);
      ) {
        if (Date.now() > deadline) throw new Error('the sweeper did not archive the last task');
        await new Promise((r) => setTimeout(r, 50));
      }
      await new Promise((r) => setTimeout(r, 200));
      expect(told()).toHaveLength(count);
    } finally {
      ws.close();
    }
  });

  it('archives inbound hook receipts by age, task or none, then catalogues their records; a redelivery is still answered', async () => {
    process.env.RL_TEST_SWEEP_HOOK_SECRET = HOOK_SECRET;
    h = await bootApi({
      ...sweeping,
      RUNLEDGER_RETENTION_CATALOG_AFTER: '1s',
      RUNLEDGER_HOOKS: JSON.stringify([HOOK]),
      RL_TEST_SWEEP_HOOK_SECRET: HOOK_SECRET,
      ...(await env()),
    });
    const server = h;
    const deliver = (event: string, delivery: string) => {
      const body = JSON.stringify({ ref: `refs/heads/${delivery}` });
      const signature = `sha256=${createHmac('sha256', HOOK_SECRET).update(body).digest('hex')}`;
      return server.request('POST', '/hooks/gh', {
        raw: body,
        headers: {
          'content-type': 'application/json',
          'x-github-event': event,
          'x-github-delivery': delivery,
          'x-hub-signature-256': signature,
        },
      });
    };
    const started = await deliver('push', 'd-push');
    const ignored = await deliver('issues', 'd-issues');
    expect([started.status, ignored.status]).toEqual([202, 202]);
    expect(ignored.body).toMatchObject({ action: 'ignored', task_id: null, duplicate: false });
    await waitForTask(server, started.body.task_id as string);
    // both receipts leave the live log: the one that started a task and the one of no task
    const liveReceipts = async () =>
      (await server.request('GET', '/admin/events?type=HOOK_RECEIVED&limit=100')).body.events as unknown[];
    for (const deadline = Date.now() + 20_000; (await liveReceipts()).length > 0;) {
      if (Date.now() > deadline) throw new Error('hook receipts stayed live');
      await new Promise((r) => setTimeout(r, 50));
    }
    const moved = await archivedTaskIds(server);
    expect(moved.filter((id) => id.startsWith('hook:gh:'))).toHaveLength(2);
    const records = await server.request('GET', '/admin/events?type=TASKS_ARCHIVED&limit=1000');
    const streams = (records.body.events as { payload: { companion_streams: string[] } }[]).flatMap(
      (e) => e.payload.companion_streams,
    );
    expect(streams.filter((id) => id.startsWith('hook:gh:'))).toHaveLength(2);
    // a second later their archived_tasks records leave the live database for the catalog, as tasks' do
    for (const deadline = Date.now() + 20_000; ;) {
      const live = await archivedRowIds(server, 'archived_tasks', 'hook:gh:');
      const catalogued = await archivedRowIds(server, 'catalog_archived_tasks', 'hook:gh:');
      if (live.length === 0 && catalogued.length === 2) break;
      if (Date.now() > deadline)
        throw new Error(`receipt records: ${live.length} live, ${catalogued.length} catalogued`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const catalogued = await server.request('GET', '/admin/events?type=TASKS_CATALOGUED&limit=1000');
    expect(catalogued.body.events.length).toBeGreaterThan(0);
    // the provider sends them again: answered from the catalogued receipts, nothing started twice
    const tasksBefore = (await server.request('GET', '/tasks?limit=100')).body.tasks.length as number;
    const again = await deliver('push', 'd-push');
    const ignoredAgain = await deliver('issues', 'd-issues');
    expect(again.body).toMatchObject({ action: 'task', task_id: started.body.task_id, duplicate: true });
    expect(ignoredAgain.body).toMatchObject({ action: 'ignored', duplicate: true });
    expect((await server.request('GET', '/tasks?limit=100')).body.tasks).toHaveLength(tasksBefore);
    expect(await liveReceipts()).toEqual([]);
  });

  it('shuts down cleanly while the sweeper is between batches', async () => {
    h = await bootApi({ ...sweeping, RUNLEDGER_RETENTION_REST_MS: '60000', ...(await env()) });
    const server = h;
    for (let i = 0; i < 4; i++) {
      const res = await server.request('POST', '/tasks', { body: { input: `list the files ${i}` } });
      await waitForTask(server, res.body.task_id as string);
    }
    for (const deadline = Date.now() + 20_000; (await archivedTaskIds(server)).length === 0;) {
      if (Date.now() > deadline) throw new Error('the sweeper archived nothing');
      await new Promise((r) => setTimeout(r, 50));
    }
    const closing = Date.now();
    await server.close();
    h = null;
    // the minute-long rest between batches does not hold the shutdown
    expect(Date.now() - closing).toBeLessThan(10_000);
  });
}

describe('retention sweeper in the server (SQLite)', () => {
  sweeperSpec(
    async () => ({}),
    async (h, table, prefix) => {
      const db = join(h.dir, 'runledger.db');
      const file = table === 'archived_tasks' ? db : catalogFile(db);
      // the catalog file exists once the first cataloguing run opened it
      if (!existsSync(file)) return [];
      const raw = new Database(file, { readonly: true });
      try {
        return (
          raw
            .prepare(`SELECT task_id FROM ${table} WHERE task_id LIKE ? ORDER BY task_id`)
            .all(`${prefix}%`) as {
            task_id: string;
          }[]
        ).map((r) => r.task_id);
      } finally {
        raw.close();
      }
    },
  );
});

describePostgres('retention sweeper in the server (PostgreSQL)', () => {
  const pg = useTestPostgres();
  const schemas: Awaited<ReturnType<typeof pg.freshSchema>>[] = [];
  afterEach(async () => {
    for (const schema of schemas.splice(0)) await schema.handle.close();
  });
  sweeperSpec(
    async () => {
      const schema = await pg.freshSchema({ migrate: false });
      schemas.push(schema);
      return { RUNLEDGER_DB: schema.url, RUNLEDGER_PG_SCHEMA: schema.schema };
    },
    async (_h, table, prefix) => {
      const { rows } = await sql<{
        task_id: string;
      }>`SELECT task_id FROM ${sql.table(table)} WHERE task_id LIKE ${`${prefix}%`} ORDER BY task_id`.execute(
        schemas.at(-1)!.handle.db,
      );
      return rows.map((r) => r.task_id);
    },
  );
});
