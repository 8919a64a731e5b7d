import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { ERASED_VALUE, NewEvent, emptyUsage } from '@runledger/contracts';
import { describePostgres, useTestPostgres } from '@runledger/testing';
import { PostgresStorage, SqliteStorage, Storage } from '../storage';
import { TempStorage, createTempPgStorage, createTempStorage } from '../testing/temp-storage';
import { withArchiver } from '../testing/with-archiver';
import { catalogFile } from '@runledger/event-store';

const SECRET = 'Ada Lovelace lives at 12 Secret Lane';
const ANSWER = 'the answer for Ada: 42 bananas';

const received = (session: string, input = SECRET): NewEvent =>
  ({
    type: 'TASK_RECEIVED',
    payload: {
      input,
      session_id: session,
      accept_checks: [
        { id: 'c1', kind: 'content_contains', target: 'out.txt', match: 'Lovelace', required: true },
      ],
      budgets: {},
      idempotency_key: null,
      request_hash: null,
    },
  }) as NewEvent;
const completed = (): NewEvent =>
  ({
    type: 'TASK_COMPLETED',
    payload: { stop_reason: 'completed', detail: `done for ${SECRET}`, usage: emptyUsage(), result: ANSWER },
  }) as NewEvent;

/** Every byte of every file in the folder (database, WAL, keys), as latin1 text to search. */
const filesText = (dir: string): string =>
  readdirSync(dir, { withFileTypes: true })
    .filter((d) => d.isFile())
    .map((d) => readFileSync(join(dir, d.name)).toString('latin1'))
    .join('\n');

/** The tasks table as stored, every column as text: what a dump of it holds. */
async function storedRows(storage: Storage): Promise<string> {
  if (storage.driver === 'postgres') {
    const { rows } = await (storage as PostgresStorage).pool.query('SELECT t::text AS row FROM tasks t');
    return rows.map((r: { row: string }) => r.row).join('\n');
  }
  return JSON.stringify((storage as SqliteStorage).raw.prepare('SELECT * FROM tasks').all());
}

function sealedRowsSuite(open: () => Promise<TempStorage<Storage>>, files: boolean) {
  let temp: TempStorage<Storage> | undefined;
  afterEach(async () => {
    await temp?.dispose();
    temp = undefined;
  });

  /** t1 still running, t2 finished, both in ses_ada; t3 in ses_bob. */
  async function given(): Promise<Storage> {
    const opened = (temp = await open());
    const { eventStore } = opened.storage;
    await eventStore.append('t1', [received('ses_ada')], { expected: 'no_stream' });
    await eventStore.append('t2', [received('ses_ada')], { expected: 'no_stream' });
    await eventStore.append('t2', [completed()], { expected: 1 });
    await eventStore.append('t3', [received('ses_bob', 'Bob asks about LOVELACE too')], {
      expected: 'no_stream',
    });
    return opened.storage;
  }

  it('stores the personal columns sealed, even of a running task, and serves them in clear', async () => {
    const storage = await given();
    expect(await storedRows(storage)).not.toContain('Lovelace');
    expect(await storedRows(storage)).not.toContain('bananas');
    if (files) expect(filesText(temp!.dir)).not.toContain('Lovelace');
    const t1 = await storage.taskStates.get('t1');
    expect(t1).toMatchObject({ input: SECRET, status: 'queued' });
    expect(t1!.accept_checks[0]).toMatchObject({ match: 'Lovelace' });
    expect(await storage.taskStates.get('t2')).toMatchObject({
      input: SECRET,
      result: ANSWER,
      stop_detail: `done for ${SECRET}`,
    });
    const page = await storage.taskStates.list({ session_id: 'ses_ada' });
    expect(page.items.map((t) => t.input)).toEqual([SECRET, SECRET]);
  });

  it('q= matches the opened input, ASCII case folded, and pages with its cursor', async () => {
    const storage = await given();
    const all = await storage.taskStates.list({ q: 'lovelace' });
    expect(all.items.map((t) => t.task_id)).toEqual(['t3', 't2', 't1']);
    expect((await storage.taskStates.list({ q: 'LANE' })).items.map((t) => t.task_id)).toEqual(['t2', 't1']);
    expect((await storage.taskStates.list({ q: 'nobody' })).items).toEqual([]);
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await storage.taskStates.list({ q: 'lovelace', limit: 1, cursor });
      seen.push(...page.items.map((t) => t.task_id));
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
    expect(seen).toEqual(['t3', 't2', 't1']);
  });

  it('a rebuild seals again, changes nothing a reader sees, and verifies clean', async () => {
    const storage = await given();
    const report = await storage.taskStates.rebuildReport();
    expect(report).toMatchObject({ tasks: 3, changed: [] });
    expect(await storedRows(storage)).not.toContain('Lovelace');
    expect(await storage.taskStates.get('t2')).toMatchObject({ input: SECRET, result: ANSWER });
  });

  it('after erasure the rows read erased; the other session and its search are untouched', async () => {
    const storage = await given();
    await storage.eventStore.append('t1', [completed()], { expected: 1 });
    await storage.erasure.erase('ses_ada');
    for (const id of ['t1', 't2'])
      expect(await storage.taskStates.get(id)).toMatchObject({
        input: ERASED_VALUE,
        result: ERASED_VALUE,
        stop_detail: ERASED_VALUE,
      });
    expect(await storedRows(storage)).not.toContain('Lovelace');
    expect((await storage.taskStates.list({ q: 'lovelace' })).items.map((t) => t.task_id)).toEqual(['t3']);
    expect((await storage.taskStates.get('t3'))!.input).toBe('Bob asks about LOVELACE too');
    if (files) expect(filesText(temp!.dir)).not.toContain('bananas');
  });
}

const HOUR = 3_600_000;

function cataloguedSuite(open: () => Promise<TempStorage<Storage>>, files: boolean) {
  let temp: TempStorage<Storage> | undefined;
  afterEach(async () => {
    await temp?.dispose();
    temp = undefined;
  });

  it('a session whose tasks were archived and catalogued is erased with them; the catalog held only ciphertext', async () => {
    const opened = (temp = await open());
    const { storage } = opened;
    await storage.eventStore.append('t1', [received('ses_ada'), completed()], { expected: 'no_stream' });
    await storage.eventStore.append('t2', [received('ses_bob', 'Bob asks')], { expected: 'no_stream' });
    await storage.eventStore.append('t2', [completed()], { expected: 1 });
    const rules = [{ older_than_ms: HOUR }];
    await withArchiver(opened, (a) => a.run({ rules }, Date.now() + 2 * HOUR));
    const run = await withArchiver(opened, (a) =>
      a.run({ rules, catalog_after_ms: HOUR }, Date.now() + 48 * HOUR),
    );
    expect(run.catalogued.tasks).toBe(2);
    expect(await storedRows(storage)).not.toContain('t1');
    if (files) expect(readFileSync(catalogFile(opened.path)).toString('latin1')).not.toContain('Lovelace');
    expect(await storage.taskStates.get('t1')).toMatchObject({ input: SECRET, result: ANSWER });
    const report = await storage.erasure.erase('ses_ada');
    expect(report.task_ids).toEqual(['t1']);
    expect(await storage.taskStates.get('t1')).toMatchObject({ input: ERASED_VALUE, result: ERASED_VALUE });
    expect((await storage.taskStates.get('t2'))!.input).toBe('Bob asks');
  });
}

describe('sealed task rows on SQLite, appends inline', () => {
  sealedRowsSuite(() => createTempStorage({ sealPayloads: true }), true);

  it('zeroes freed pages (secure_delete) on the connection', async () => {
    const temp = await createTempStorage({ sealPayloads: true });
    try {
      expect((temp.storage as SqliteStorage).raw.pragma('secure_delete', { simple: true })).toBe(1);
    } finally {
      await temp.dispose();
    }
  });
});

describe('sealed task rows in the archive catalog, SQLite', () => {
  cataloguedSuite(() => createTempStorage({ sealPayloads: true }), true);
});

describe('sealed task rows on SQLite, appends in the writer thread', () => {
  sealedRowsSuite(() => createTempStorage({ sealPayloads: true, writerThread: true }), true);
});

describePostgres('sealed task rows on PostgreSQL', () => {
  const pg = useTestPostgres();
  sealedRowsSuite(() => createTempPgStorage(pg, { sealPayloads: true }), false);
  describe('in the archive catalog', () =>
    cataloguedSuite(() => createTempPgStorage(pg, { sealPayloads: true }), false));
});
