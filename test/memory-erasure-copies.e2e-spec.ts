import { MemoryService } from '@runledger/memory';
import { ModelBackend } from '@runledger/runtime';
import {
  TaskRoutedBackend,
  describePostgres,
  postgresStoredText,
  sqliteStoredText,
  useTestPostgres,
} from '@runledger/testing';
// eslint-disable-next-line no-restricted-imports
import { APP_CONFIG, AppConfig } from '../apps/controller/src/config';
import { ApiHarness, bootApi, waitForTask } from './api-harness';

/**
 * With RUNLEDGER_ERASURE=on no memory record copies an entry's text outside the keys of the
 * entry's session: session B's near-duplicate of session A's memory is B's own entry (deduplication
 * reinforces only what B may reach), a reinforce names its entry by id (a task's, and a memory
 * tool's on `system:memory`, sealed under its session), and an admin delete records no text. After
 * A's erasure nothing in the database (file, WAL, index file; every table on PostgreSQL), the log
 * or B's events holds A's text; B keeps working and memory rebuilt from the log is the same.
 */
jest.setTimeout(60_000);

const SECRET_A = 'ZebraLovelace42';
const SECRET_B = 'QuokkaHopper77';
const KEY_A = 'MarmotKeyhole31';
/** near-duplicates for any two secrets (cosine about 0.98 with the hashing embedder) */
const phrase = (secret: string) =>
  `the harbour archive vault phrase is ${secret}, kept in the blue ledger in room four of the east wing ` +
  'beside the old maps, the ship logs and the tide tables of the northern harbour since the great storm';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Ev = { type: string; task_id: string; session_id: string; payload: any };

/**
 * A model for tasks whose input is `[n] remember: <text>` (memory_insert of the text, then an
 * answer) or `[n] <anything>` (an answer at once, which memory keeps as the task's summary).
 */
const memoryModel = () => {
  const calls = new Map<string, number>();
  return new TaskRoutedBackend((task) => {
    const [, n, rest] = /^\[(\d+)\] ([\s\S]*)$/m.exec(task) ?? [];
    const call = calls.get(n) ?? 0;
    calls.set(n, call + 1);
    const insert = /^remember: (.*)$/m.exec(rest ?? '')?.[1];
    return insert && call === 0
      ? JSON.stringify({ type: 'tool', tool: 'memory_insert', args: { text: insert, kind: 'fact' } })
      : JSON.stringify({ type: 'respond', content: 'noted' });
  });
};

/** `everything`: the stored bytes where A's text must not be (SQLite: the files; PostgreSQL: every table's rows). */
function copiesSpec(
  env: () => Promise<Record<string, string>>,
  everything: (h: ApiHarness) => Promise<string>,
) {
  let h: ApiHarness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  /** A server with erasure and memory on; `run` completes a task and returns its events. */
  const boot = async () => {
    h = await bootApi(
      { RUNLEDGER_ERASURE: 'on', RUNLEDGER_MEMORY: 'on', RUNLEDGER_CRITIC: 'off', ...(await env()) },
      { overrides: [[ModelBackend, memoryModel()]], checkResponses: true },
    );
    const server = h;
    let n = 0;
    const run = async (input: string, session_id: string) => {
      const res = await server.request('POST', '/tasks', {
        body: { input: `[${++n}] ${input}`, session_id },
      });
      expect(res.status).toBe(202);
      expect((await waitForTask(server, res.body.task_id)).status).toBe('completed');
      const events = (await server.request('GET', `/tasks/${res.body.task_id}/events?limit=1000`)).body
        .events as Ev[];
      return { task_id: res.body.task_id as string, events };
    };
    return { server, run };
  };

  /** Where `secret` is found in `text`, with what precedes it ('' when nowhere). */
  const around = (text: string, secret: string) => {
    const at = text.indexOf(secret);
    return at < 0 ? '' : text.slice(Math.max(0, at - 300), at + 50);
  };

  it('erasing session A leaves no copy of its memory texts: not in B’s near-duplicates, not in reinforces or deletes', async () => {
    const { server, run } = await boot();
    const written = (events: Ev[]) => events.filter((e) => e.type === 'MEMORY_WRITTEN').map((e) => e.payload);
    const memoryOf = async (session: string) =>
      (await server.request('GET', `/memory?session_id=${session}&k=50`)).body.entries as {
        id: string;
        text: string;
        kind: string;
      }[];

    // session A: a memory tool's fact, a task's summary, the same fact again (a reinforce on the
    // system stream), and a fact an admin deletes
    await run(`remember: ${phrase(SECRET_A)}`, 'ses_a');
    const summaryA = await run(phrase(SECRET_A), 'ses_a');
    expect(written(summaryA.events)).toMatchObject([{ op: 'insert', kind: 'summary' }]);
    await run(`remember: ${phrase(SECRET_A)}`, 'ses_a');
    await run(`remember: the spare key ${KEY_A} of the archive hangs by the door`, 'ses_a');
    const entriesA = await memoryOf('ses_a');
    expect(entriesA.map((e) => e.kind).sort()).toEqual(['fact', 'fact', 'summary']);
    const spare = entriesA.find((e) => e.text.includes(KEY_A))!;
    expect((await server.request('DELETE', `/memory/${spare.id}`)).status).toBe(200);
    const systemLog = (await server.request('GET', '/admin/events?task_id=system:memory&limit=1000')).body
      .events as Ev[];
    expect(systemLog.map((e) => [e.payload.op, e.session_id])).toEqual([
      ['insert', 'ses_a'],
      ['reinforce', 'ses_a'],
      ['insert', 'ses_a'],
      ['delete', 'system'],
    ]);
    for (const e of systemLog.filter((e) => e.payload.op !== 'insert'))
      expect(e.payload).not.toHaveProperty('text');

    // session B writes near-duplicates of A's fact and summary: its own entries, nothing of A's
    const summaryB = await run(phrase(SECRET_B), 'ses_b');
    const factB = await run(`remember: ${phrase(SECRET_B)}`, 'ses_b');
    expect(written(summaryB.events)).toMatchObject([{ op: 'insert', kind: 'summary' }]);
    expect((await memoryOf('ses_b')).map((e) => e.kind).sort()).toEqual(['fact', 'summary']);
    for (const b of [summaryB, factB]) expect(JSON.stringify(b.events)).not.toContain(SECRET_A);

    const erased = await server.request('POST', '/sessions/ses_a/erase');
    expect([erased.status, erased.body.key_destroyed]).toEqual([200, true]);
    const memory = server.app.get(MemoryService);
    await memory.sync();

    const expectNoCopyOfA = async () => {
      const log = (await server.request('GET', '/admin/events?after_position=0&limit=1000')).text;
      expect(log).toContain(SECRET_B);
      const places = {
        stored: await everything(server),
        log,
        taskB: JSON.stringify([summaryB, factB].map((b) => b.events)),
        memory: (await server.request('GET', '/memory?query=harbour%20archive%20vault&k=50')).text,
      };
      for (const [place, text] of Object.entries(places))
        for (const secret of [SECRET_A, KEY_A])
          expect([place, secret, around(text, secret)]).toEqual([place, secret, '']);
    };
    await expectNoCopyOfA();

    // B works on: a new task recalls B's own memory, and its entries read in clear
    const later = await run('what is the harbour archive vault phrase?', 'ses_b');
    const recalled = later.events
      .filter((e) => e.type === 'CONTEXT_BUILT')
      .flatMap((e) => e.payload.memory_hits);
    expect(JSON.stringify(recalled)).toContain(SECRET_B);
    expect(JSON.stringify(recalled)).not.toContain(SECRET_A);
    const entriesB = await memoryOf('ses_b');
    expect(entriesB.filter((e) => e.text.includes(SECRET_B))).toHaveLength(2);

    // memory rebuilt from the log: the same entries, and still no copy
    const state = async () =>
      (await memory.list({}, 100))
        .map((e) => ({ id: e.id, text: e.text, weight: e.weight, session_id: e.session_id, kind: e.kind }))
        .sort((a, b) => a.id.localeCompare(b.id));
    const before = await state();
    expect(before.length).toBeGreaterThanOrEqual(3);
    await memory.rebuildFromLog();
    expect(await state()).toEqual(before);
    await expectNoCopyOfA();
    expect(server.responseMismatches).toEqual([]);
  });

  it('erasing a task tree leaves no memory record of its text in the session’s other trees', async () => {
    const { server, run } = await boot();
    const x = await run(`remember: ${phrase(SECRET_A)}`, 'ses_c');
    // another tree of the session: its near-duplicate reinforces the first tree's entry, naming it by id
    await run(`remember: ${phrase(SECRET_B)}`, 'ses_c');
    const memoryLog = async () =>
      ((await server.request('GET', '/admin/events?type=MEMORY_WRITTEN&limit=1000')).body.events as Ev[]).map(
        (e) => [e.payload.op, e.session_id, e.payload.text ?? null],
      );
    expect(await memoryLog()).toEqual([
      ['insert', 'ses_c', phrase(SECRET_A)],
      ['reinforce', 'ses_c', null],
    ]);
    const erased = await server.request('POST', `/tasks/${x.task_id}/erase`);
    expect([erased.status, erased.body.memory_entries]).toEqual([200, 1]);
    const records = JSON.stringify(await memoryLog());
    const stored = await everything(server);
    for (const [place, text] of Object.entries({ records, stored }))
      expect([place, around(text, SECRET_A)]).toEqual([place, '']);
    expect(server.responseMismatches).toEqual([]);
  });
}

describe('memory copies and erasure (SQLite)', () => {
  copiesSpec(
    async () => ({}),
    async (server) => {
      // the database, its WAL and the memory index files beside it
      const db = server.app.get<AppConfig>(APP_CONFIG).RUNLEDGER_DB;
      await server.app.get(MemoryService).flush();
      const stored = sqliteStoredText(db);
      expect(stored.places).toEqual(expect.arrayContaining([db, `${db}-wal`, `${db}.memory.hnsw`]));
      return stored.text;
    },
  );
});

describePostgres('memory copies and erasure (PostgreSQL)', () => {
  const pg = useTestPostgres();
  let schema: Awaited<ReturnType<typeof pg.freshSchema>> | null = null;
  afterEach(async () => {
    await schema?.dispose();
    schema = null;
  });
  copiesSpec(
    async () => {
      schema = await pg.freshSchema({ migrate: false });
      return { RUNLEDGER_DB: schema.url, RUNLEDGER_PG_SCHEMA: schema.schema };
    },
    async () => {
      // every row of every table of the schema, as text: what a dump or a dead tuple holds
      const stored = await postgresStoredText(schema!);
      expect(stored.places).toEqual(expect.arrayContaining(['events', 'memory_entries', 'tasks']));
      return stored.text;
    },
  );
});
