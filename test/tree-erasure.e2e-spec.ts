import Database from 'better-sqlite3';
import { ERASED_VALUE } from '@runledger/contracts';
import { MemoryService } from '@runledger/memory';
import { RuntimeController } from '@runledger/runtime';
import {
  FakeOpenAiServer,
  FakeReply,
  TempPostgres,
  describePostgres,
  postgresStoredText,
  runCli,
  sqliteStoredText,
  startFakeOpenAiServer,
  stderrProblems,
  useTestPostgres,
} from '@runledger/testing';
// eslint-disable-next-line no-restricted-imports
import { APP_CONFIG, AppConfig } from '../apps/controller/src/config';
import { ApiHarness, TOKENS, WsClient, bootApi, readUntil, waitForTask } from './api-harness';

/**
 * Erasure of one task tree end to end (POST /tasks/:id/erase, `runledger erase --task`): a root that
 * delegated a child and a second tree of the same session run with RUNLEDGER_ERASURE=on; erasing
 * the tree (named by its child) serves both of its tasks erased everywhere, leaves the other tree
 * in clear, forgets the tree's memory entries and checkpoints, records TASK_TREE_ERASED once, and
 * every response conforms to the OpenAPI document. Then the same for trees whose records moved on
 * into the archive's catalog (the second tier of retention): `runledger archive` in a child process
 * catalogues three trees of one session; one is erased through POST /tasks/:id/erase named by a
 * child, another through `runledger erase --task` (a child process) named by its root. Each erasure
 * reaches every task of its tree (as does one of a fourth tree, archived but not catalogued), every
 * reader serves them erased, the third tree reads in clear, and no stored byte (database, WAL,
 * catalog, segments; PostgreSQL: every row) holds an erased tree's text.
 */
jest.setTimeout(60_000);

const SECRET = 'QuokkaHopper31';
const OTHER = 'KeepMeB88';
const ROOT = `plan the trip for ${SECRET}`;
const CHILD = `book the hotel for ${SECRET}`;
const TREE_B = `say hello to ${OTHER}`;
const WAIT = 'touch a file and wait';
const SECRET_A = 'WombatLantern47';
const SECRET_C = 'NarwhalCompass93';
const SECRET_D = 'OcelotBeacon58';
const CATALOG_SESSION = 'ses_cat_trip';
/** A catalogued tree: its root delegates two children, one after the other, then answers. */
const catalogTree = (secret: string) => ({
  root: `plan the journey for ${secret}`,
  first: `book the hotel room for ${secret}`,
  second: `book the train for ${secret}`,
});
const TREE_A = catalogTree(SECRET_A);
const TREE_C = catalogTree(SECRET_C);
const TREE_D = catalogTree(SECRET_D);

type Body = Record<string, unknown>;
type Wire = { role: string; content?: string | null };
const taskOf = (body: Body): string => {
  const user = ((body.messages as Wire[]) ?? []).find((m) => m.role === 'user')?.content ?? '';
  return /## Task\n([\s\S]*)$/.exec(user)?.[1].trim() ?? '';
};
const toolResults = (body: Body): number =>
  ((body.messages as Wire[]) ?? []).filter((m) => m.role === 'tool').length;

const delegate = (id: string, input: string): FakeReply => ({
  tool_calls: [{ id, name: 'runledger_delegate', arguments: JSON.stringify({ agent: 'coder', input }) }],
});

const route = (body: Body): FakeReply | undefined => {
  const task = taskOf(body);
  const rounds = toolResults(body);
  for (const t of [TREE_A, TREE_C, TREE_D]) {
    if (task === t.root)
      return rounds === 0
        ? delegate('call_hotel', t.first)
        : rounds === 1
          ? delegate('call_train', t.second)
          : { content: `${t.root}: done` };
    if (task === t.first || task === t.second) return { content: `${task}: booked` };
  }
  if (task === ROOT)
    return rounds === 0
      ? {
          tool_calls: [
            {
              id: 'call_hotel',
              name: 'runledger_delegate',
              arguments: JSON.stringify({ agent: 'coder', input: CHILD }),
            },
          ],
        }
      : { content: `trip planned for ${SECRET}` };
  if (task === CHILD) return { content: `hotel booked for ${SECRET}` };
  if (task.startsWith('say hello to')) return { content: `hello ${OTHER}` };
  if (task === WAIT)
    return rounds === 0
      ? {
          tool_calls: [
            { id: 'w1', name: 'shell_exec', arguments: JSON.stringify({ command: 'touch wait.txt' }) },
          ],
        }
      : { content: 'done' };
  return undefined;
};

const around = (text: string, needle: string): string => {
  const at = text.indexOf(needle);
  return at < 0 ? '' : text.slice(Math.max(0, at - 80), at + needle.length + 80);
};

/** A user preference per task, stored in the session's memory for that task. */
async function remember(memory: MemoryService, session: string, entries: Array<[string, string]>) {
  for (const [taskId, text] of entries)
    await memory.insert({
      text,
      kind: 'user_preference',
      source: 'user',
      weight: 0.9,
      task_id: taskId,
      session_id: session,
      reason: 'said so',
    });
}

const eventsOf = async (api: ApiHarness, id: string) =>
  (await api.request('GET', `/tasks/${id}/events?limit=1000`)).body.events as {
    type: string;
    payload: Record<string, unknown>;
  }[];

/** `stored`: every stored byte as text (SQLite: the files; PostgreSQL: every table's rows). */
function treeErasureSpec(
  env: () => Promise<Record<string, string>>,
  sqlite: boolean,
  stored: (h: ApiHarness) => Promise<string>,
): void {
  let server: FakeOpenAiServer | null = null;
  let h: ApiHarness | null = null;
  afterEach(async () => {
    await h?.close();
    await server?.close();
    h = null;
    server = null;
  });

  /** A server with erasure and memory on, tasks answered by `route`; `storage`: its database. */
  const boot = async (storage: Record<string, string>): Promise<ApiHarness> => {
    server = await startFakeOpenAiServer({ apiKey: 'test-key' });
    server.setRoute(route);
    h = await bootApi(
      {
        RUNLEDGER_ERASURE: 'on',
        RUNLEDGER_MEMORY: 'on',
        RUNLEDGER_MODEL: 'openai',
        OPENAI_BASE_URL: server.baseURL,
        OPENAI_API_KEY: 'test-key',
        RUNLEDGER_MODEL_ORCHESTRATOR: 'tree-model',
        RUNLEDGER_CRITIC: 'off',
        ...storage,
      },
      { checkResponses: true },
    );
    return h;
  };

  it("erases one task tree (named by its child): every reader serves it erased, the session's other tree reads in clear, memory and checkpoints of the tree are gone", async () => {
    const api = await boot(await env());
    const submit = async (input: string, session: string) => {
      const res = await api.request('POST', '/tasks', { body: { input, session_id: session } });
      expect(res.status).toBe(202);
      return res.body.task_id as string;
    };
    // a task of another session waits for a permission (an unfinished tree), and tree B runs, before
    // tree A: a task's context copies memory hits of other trees into its own events, which an
    // erasure of A does not reach (docs/retention.md, "What a tree's erasure does not reach")
    const waiting = await submit(WAIT, 'ses_wait');
    await waitForTask(api, waiting, (s) => s === 'awaiting_permission');
    const other = await submit(TREE_B, 'ses_trip');
    expect(await waitForTask(api, other)).toMatchObject({ status: 'completed' });
    const root = await submit(ROOT, 'ses_trip');
    expect(await waitForTask(api, root)).toMatchObject({
      status: 'completed',
      result: `trip planned for ${SECRET}`,
    });
    const children = (await api.request('GET', `/tasks/${root}/children`)).body.children as {
      task_id: string;
    }[];
    expect(children).toHaveLength(1);
    const child = children[0].task_id;
    const memory = api.app.get(MemoryService);
    await remember(memory, 'ses_trip', [
      [child, `${SECRET} prefers sea views`],
      [other, `${OTHER} prefers tea`],
    ]);
    const before = await eventsOf(api, root);
    expect(JSON.stringify(before)).toContain(SECRET);
    const config = api.app.get<AppConfig>(APP_CONFIG);
    const checkpointsOf = (ids: string[]): number | null => {
      if (!sqlite) return null;
      const raw = new Database(config.RUNLEDGER_DB, { readonly: true });
      try {
        return raw
          .prepare<string[], { n: number }>(
            `SELECT count(*) AS n FROM checkpoints WHERE task_id IN (${ids.map(() => '?').join(', ')})`,
          )
          .get(...ids)!.n;
      } finally {
        raw.close();
      }
    };
    const checkpointsBefore = checkpointsOf([root, child]);
    if (sqlite) expect(checkpointsBefore).toBeGreaterThan(0);
    const memoryOf = async (ids: string[]) =>
      (await Promise.all(ids.map((id) => memory.list({ task_id: id }, 100)))).flat().length;
    const treeMemory = await memoryOf([root, child]);
    expect(treeMemory).toBeGreaterThan(0);

    // bad requests write nothing: no scope, a system stream, an id too long, no such task, a tree not finished
    for (const [path, token, status] of [
      [`/tasks/${root}/erase`, TOKENS.writer, 403],
      ['/tasks/system:erasure/erase', TOKENS.admin, 400],
      [`/tasks/${'x'.repeat(300)}/erase`, TOKENS.admin, 400],
      ['/tasks/task_nobody/erase', TOKENS.admin, 404],
      [`/tasks/${waiting}/erase`, TOKENS.admin, 409],
    ] as const) {
      const res = await api.request('POST', path, { token });
      expect([path.slice(0, 40), res.status]).toEqual([path.slice(0, 40), status]);
      expect(res.body).toEqual(
        expect.objectContaining({ error: expect.any(String), message: expect.any(String) }),
      );
    }
    expect((await api.request('GET', '/admin/events?type=TASK_TREE_ERASED')).body.events).toEqual([]);
    expect(JSON.stringify(await eventsOf(api, waiting))).toContain('touch wait.txt');

    // the child names its root's tree
    const erased = await api.request('POST', `/tasks/${child}/erase`);
    expect(erased.status).toBe(200);
    expect(erased.body).toMatchObject({
      session_id: 'ses_trip',
      root_task_id: root,
      key_destroyed: true,
      task_ids: [root, child].sort(),
      clear_events: 0,
      archived_events: 0,
      memory_entries: treeMemory,
    });
    expect(erased.body.sealed_events).toBeGreaterThan(5);
    expect(erased.body.streams).toEqual(expect.arrayContaining([root, child, `outbound:${root}`]));
    if (sqlite) {
      expect(erased.body.checkpoints_deleted).toBe(checkpointsBefore);
      expect(checkpointsOf([root, child])).toBe(0);
    }

    // every reader of the tree: task, events, SSE replay, WebSocket replay, the global log, the session
    for (const id of [root, child]) {
      const task = (await api.request('GET', `/tasks/${id}`)).body;
      expect(task).toMatchObject({ status: 'completed' });
      expect(JSON.stringify(task)).not.toContain(SECRET);
      const events = await eventsOf(api, id);
      expect(JSON.stringify(events)).not.toContain(SECRET);
      expect(events[0].payload).toMatchObject({ input: ERASED_VALUE, $erased: 'erased' });
      const sse = await fetch(`${api.url}/tasks/${id}/stream`, {
        headers: { authorization: `Bearer ${TOKENS.admin}` },
        signal: AbortSignal.timeout(3000),
      });
      const text = await readUntil(sse, 'TASK_COMPLETED');
      expect(text).toContain('"$erased":"erased"');
      expect(text).not.toContain(SECRET);
    }
    expect((await eventsOf(api, root)).map((e) => e.type)).toEqual(before.map((e) => e.type));
    const ws = await WsClient.authed(api.wsUrl, TOKENS.admin);
    try {
      ws.send({ type: 'subscribe', task_id: root, after_seq: 0 });
      await ws.waitFor((m) => m.type === 'event' && m.event.type === 'TASK_COMPLETED');
      ws.send({ type: 'subscribe_all', after_position: 0 });
      await ws.waitFor((m) => m.type === 'event' && m.event.type === 'TASK_TREE_ERASED');
      const replayed = JSON.stringify(ws.messages);
      expect(replayed).toContain('"$erased":"erased"');
      expect(replayed).not.toContain(SECRET);
      expect(replayed).toContain(OTHER);
    } finally {
      ws.ws.close();
    }
    const log = await api.request('GET', '/admin/events?after_position=0&limit=1000');
    expect(log.text).not.toContain(SECRET);
    expect(log.text).toContain(`hello ${OTHER}`);
    expect(log.text).toContain(`${OTHER} prefers tea`);
    for (const path of ['/sessions/ses_trip', '/tasks?session_id=ses_trip']) {
      const res = await api.request('GET', path);
      expect(res.status).toBe(200);
      expect(res.text).not.toContain(SECRET);
      expect(res.text).toContain(OTHER);
    }
    // the other tree of the session reads in clear
    expect((await api.request('GET', `/tasks/${other}`)).body.result).toBe(`hello ${OTHER}`);
    expect((await eventsOf(api, other))[0].payload).not.toHaveProperty('$erased');

    // memory: the tree's entry is gone from the index and the table, the other tree's stays
    await memory.sync();
    expect(await memory.list({ task_id: child }, 10)).toEqual([]);
    expect(JSON.stringify(await memory.list({ session_id: 'ses_trip' }, 10))).toContain(
      `${OTHER} prefers tea`,
    );
    if (sqlite) {
      const raw = new Database(config.RUNLEDGER_DB, { readonly: true });
      const texts = raw.prepare<[], { text: string }>('SELECT text FROM memory_entries').all();
      raw.close();
      expect(texts.map((t) => t.text).join('\n')).not.toContain(SECRET);
    }

    // recorded once, ids only
    const records = (await api.request('GET', '/admin/events?type=TASK_TREE_ERASED')).body.events as {
      task_id: string;
      payload: unknown;
    }[];
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({
      task_id: 'system:erasure',
      payload: { session_id: 'ses_trip', root_task_id: root, task_ids: [root, child].sort() },
    });

    // replay and fork refuse the erased tree; the other tree still replays
    const runtime = api.app.get(RuntimeController);
    await expect(runtime.replay(root)).rejects.toThrow(/content was erased/);
    const fork = await api.request('POST', `/tasks/${root}/fork`, { body: { at_sequence: 1 } });
    expect([fork.status, fork.body.message]).toEqual([409, expect.stringContaining('erased')]);
    await expect(runtime.replay(other)).resolves.toBeDefined();
    // the session takes new tasks; erasing the tree again scrubs again and records nothing
    const next = await submit(`say hello to ${OTHER} again`, 'ses_trip');
    expect((await waitForTask(api, next)).status).toBe('completed');
    const again = await api.request('POST', `/tasks/${root}/erase`);
    expect([again.status, again.body.key_destroyed, again.body.root_task_id]).toEqual([200, false, root]);
    expect((await api.request('GET', '/admin/events?type=TASK_TREE_ERASED')).body.events).toHaveLength(1);

    if (sqlite) {
      // the CLI form, in another process while the server runs: the server's next read serves it erased
      const cliEnv = {
        RUNLEDGER_DB: config.RUNLEDGER_DB,
        RUNLEDGER_ERASURE: 'on',
        RUNLEDGER_ALLOWED_ROOT: api.workspace,
      };
      const otherMemory = await memoryOf([other]);
      const usage = await runCli(['erase', 'ses_trip', '--task', other], { cwd: api.dir, env: cliEnv });
      expect([usage.code, usage.stderr]).toEqual([2, expect.stringContaining('one of them')]);
      const cli = await runCli(['erase', '--task', other, '--json'], { cwd: api.dir, env: cliEnv });
      expect(stderrProblems(cli.stderr)).toEqual([]);
      expect(cli.code).toBe(0);
      expect(JSON.parse(cli.stdout)).toMatchObject({
        erase: { root_task_id: other, task_ids: [other], key_destroyed: true, memory_entries: otherMemory },
      });
      const events = JSON.stringify(await eventsOf(api, other));
      expect(events).not.toContain(OTHER);
      expect(events).toContain('"$erased":"erased"');
    }
    expect(await api.checkedMismatches()).toEqual([]);
  });

  it('erases catalogued trees named by a child (HTTP) and by the root (CLI), and an archived one: every member of each tree, no other tree', async () => {
    const storage = await env();
    const api = await boot(storage);
    const config = api.app.get<AppConfig>(APP_CONFIG);
    const cli = (args: string[], extra: Record<string, string> = {}) =>
      runCli(args, {
        cwd: api.dir,
        env: {
          RUNLEDGER_DB: config.RUNLEDGER_DB,
          RUNLEDGER_ERASURE: 'on',
          RUNLEDGER_ALLOWED_ROOT: api.workspace,
          ...storage,
          ...extra,
        },
      });
    const submit = async (input: string) => {
      const res = await api.request('POST', '/tasks', { body: { input, session_id: CATALOG_SESSION } });
      expect(res.status).toBe(202);
      const id = res.body.task_id as string;
      expect((await waitForTask(api, id)).status).toBe('completed');
      return id;
    };
    const membersOf = async (root: string) => {
      const children = (await api.request('GET', `/tasks/${root}/children`)).body.children as {
        task_id: string;
      }[];
      expect(children).toHaveLength(2);
      return [root, ...children.map((c) => c.task_id)];
    };
    const other = await submit(TREE_B);
    const treeA = await membersOf(await submit(TREE_A.root));
    const treeC = await membersOf(await submit(TREE_C.root));
    const memory = api.app.get(MemoryService);
    await remember(memory, CATALOG_SESSION, [
      [treeA[2], `${SECRET_A} prefers sea views`],
      [treeC[1], `${SECRET_C} prefers mountains`],
      [other, `${OTHER} prefers tea`],
    ]);
    const typesBefore = new Map<string, string[]>();
    for (const id of [...treeA, ...treeC, other])
      typesBefore.set(
        id,
        (await eventsOf(api, id)).map((e) => e.type),
      );
    expect(JSON.stringify(await eventsOf(api, treeA[2]))).toContain(SECRET_A);
    const eventCount = (ids: string[]) => ids.reduce((n, id) => n + typesBefore.get(id)!.length, 0);

    // the three trees move into the archive and at once (a catalog age of 0s) on into its catalog
    const moved = await cli(['archive', '--older-than', '0s', '--json'], {
      RUNLEDGER_RETENTION_CATALOG_AFTER: '0s',
    });
    expect(stderrProblems(moved.stderr)).toEqual([]);
    expect(moved.code).toBe(0);
    const run = (JSON.parse(moved.stdout) as { archive: { tasks: string[]; catalogued: { tasks: number } } })
      .archive;
    expect(run.tasks).toEqual(expect.arrayContaining([...treeA, ...treeC, other]));
    expect(run.catalogued.tasks).toBe(run.tasks.length);
    // still read from the catalog and its segments
    expect(JSON.stringify(await eventsOf(api, treeA[2]))).toContain(SECRET_A);
    const memoryOf = async (ids: string[]) =>
      (await Promise.all(ids.map((id) => memory.list({ task_id: id }, 100)))).flat().length;
    const [memoryA, memoryC] = [await memoryOf(treeA), await memoryOf(treeC)];
    expect(await memoryOf([treeA[2]])).toBeGreaterThan(await memoryOf([treeA[1]]));

    // tree D runs after them and is archived only (no catalog): its records stay in the live
    // `archived_tasks`, its events in a segment
    const treeD = await membersOf(await submit(TREE_D.root));
    await remember(memory, CATALOG_SESSION, [[treeD[2], `${SECRET_D} prefers the coast`]]);
    for (const id of treeD)
      typesBefore.set(
        id,
        (await eventsOf(api, id)).map((e) => e.type),
      );
    const memoryD = await memoryOf(treeD);
    const archivedOnly = await cli(['archive', '--older-than', '0s', '--json'], {
      RUNLEDGER_RETENTION_CATALOG_AFTER: 'off',
    });
    expect(archivedOnly.code).toBe(0);
    expect(JSON.parse(archivedOnly.stdout)).toMatchObject({
      archive: { tasks: expect.arrayContaining(treeD), catalogued: { tasks: 0 } },
    });

    // tree A, named by its first child: the root and the other child are erased with it
    const erased = await api.request('POST', `/tasks/${treeA[1]}/erase`);
    expect(erased.status).toBe(200);
    expect(erased.body).toMatchObject({
      session_id: CATALOG_SESSION,
      root_task_id: treeA[0],
      key_destroyed: true,
      task_ids: [...treeA].sort(),
      memory_entries: memoryA,
      // nothing of the tree is live: its events are in the archive's segments
      sealed_events: 0,
      archived_events: eventCount(treeA),
    });
    expect(erased.body.streams).toEqual(expect.arrayContaining(treeA));

    // tree C, named by its root, by the CLI in another process while the server runs
    const byCli = await cli(['erase', '--task', treeC[0], '--json']);
    expect(stderrProblems(byCli.stderr)).toEqual([]);
    expect(byCli.code).toBe(0);
    expect(JSON.parse(byCli.stdout)).toMatchObject({
      erase: {
        session_id: CATALOG_SESSION,
        root_task_id: treeC[0],
        key_destroyed: true,
        task_ids: [...treeC].sort(),
        memory_entries: memoryC,
        sealed_events: 0,
        archived_events: eventCount(treeC),
      },
    });

    // tree D, archived, named by its second child
    const erasedD = await api.request('POST', `/tasks/${treeD[2]}/erase`);
    expect(erasedD.body).toMatchObject({
      root_task_id: treeD[0],
      key_destroyed: true,
      task_ids: [...treeD].sort(),
      memory_entries: memoryD,
      sealed_events: 0,
      archived_events: eventCount(treeD),
    });

    // every reader of the three trees: the task, its events, SSE replay
    for (const [id, secret] of [
      ...treeA.map((id) => [id, SECRET_A]),
      ...treeC.map((id) => [id, SECRET_C]),
      ...treeD.map((id) => [id, SECRET_D]),
    ]) {
      const task = await api.request('GET', `/tasks/${id}`);
      expect([id, task.status, task.body.status]).toEqual([id, 200, 'completed']);
      expect([id, around(task.text, secret)]).toEqual([id, '']);
      const events = await eventsOf(api, id);
      expect(events.map((e) => e.type)).toEqual(typesBefore.get(id));
      expect([id, around(JSON.stringify(events), secret)]).toEqual([id, '']);
      expect(events[0].payload).toMatchObject({ input: ERASED_VALUE, $erased: 'erased' });
      const sse = await fetch(`${api.url}/tasks/${id}/stream`, {
        headers: { authorization: `Bearer ${TOKENS.admin}` },
        signal: AbortSignal.timeout(5000),
      });
      const text = await readUntil(sse, 'TASK_COMPLETED');
      expect(text).toContain('"$erased":"erased"');
      expect([id, around(text, secret)]).toEqual([id, '']);
    }
    // the global log, the session, the lists
    for (const path of [
      '/admin/events?after_position=0&limit=1000',
      `/sessions/${CATALOG_SESSION}`,
      `/tasks?session_id=${CATALOG_SESSION}&limit=100`,
      '/tasks?limit=100',
    ]) {
      const res = await api.request('GET', path);
      expect([path, res.status]).toEqual([path, 200]);
      for (const secret of [SECRET_A, SECRET_C, SECRET_D])
        expect([path, around(res.text, secret)]).toEqual([path, '']);
    }
    expect((await api.request('GET', `/sessions/${CATALOG_SESSION}`)).text).toContain(OTHER);
    // the session's third tree, catalogued with them, reads in clear
    expect((await api.request('GET', `/tasks/${other}`)).body.result).toBe(`hello ${OTHER}`);
    const otherEvents = await eventsOf(api, other);
    expect(otherEvents[0].payload).toMatchObject({ input: TREE_B });
    expect(otherEvents[0].payload).not.toHaveProperty('$erased');

    // memory: the catalogued children's entries are gone, the third tree's stays
    await memory.sync();
    for (const id of [...treeA, ...treeC, ...treeD])
      expect(await memory.list({ task_id: id }, 10)).toEqual([]);
    expect(JSON.stringify(await memory.list({ session_id: CATALOG_SESSION }, 10))).toContain(
      `${OTHER} prefers tea`,
    );

    // recorded once each, ids only, naming every member reached
    const records = (await api.request('GET', '/admin/events?type=TASK_TREE_ERASED')).body.events as {
      payload: { root_task_id: string; task_ids: string[] };
    }[];
    expect(records.map((r) => [r.payload.root_task_id, r.payload.task_ids])).toEqual([
      [treeA[0], [...treeA].sort()],
      [treeC[0], [...treeC].sort()],
      [treeD[0], [...treeD].sort()],
    ]);
    // again, by the other child: nothing more to destroy, nothing recorded
    const again = await api.request('POST', `/tasks/${treeA[2]}/erase`);
    expect([again.status, again.body.key_destroyed, again.body.task_ids]).toEqual([
      200,
      false,
      [...treeA].sort(),
    ]);
    expect((await api.request('GET', '/admin/events?type=TASK_TREE_ERASED')).body.events).toHaveLength(3);

    const bytes = await stored(api);
    for (const secret of [SECRET_A, SECRET_C, SECRET_D])
      expect([secret, around(bytes, secret)]).toEqual([secret, '']);
    expect(await api.checkedMismatches()).toEqual([]);
  });
}

describe('task tree erasure (SQLite)', () => {
  treeErasureSpec(
    async () => ({}),
    true,
    async (api) => {
      await api.app.get(MemoryService).flush();
      const db = api.app.get<AppConfig>(APP_CONFIG).RUNLEDGER_DB;
      const stored = sqliteStoredText(db);
      expect(stored.places).toEqual(expect.arrayContaining([db, `${db}.archive/catalog.db`]));
      expect(stored.places.some((f) => f.endsWith('.jsonl.gz'))).toBe(true);
      return stored.text;
    },
  );
});

describePostgres('task tree erasure (PostgreSQL)', () => {
  const pg = useTestPostgres();
  let schema: TempPostgres | null = null;
  afterEach(async () => {
    await schema?.dispose();
    schema = null;
  });
  treeErasureSpec(
    async () => {
      schema = await pg.freshSchema({ migrate: false });
      return { RUNLEDGER_DB: schema.url, RUNLEDGER_PG_SCHEMA: schema.schema };
    },
    false,
    async () => {
      const stored = await postgresStoredText(schema!);
      expect(stored.places).toEqual(
        expect.arrayContaining(['events', 'catalog_tasks', 'catalog_archived_tasks', 'archive_segments']),
      );
      return stored.text;
    },
  );
});
