import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { ERASED_VALUE, IllegalStateError, NewEvent, RuntimeEvent, emptyUsage } from '@runledger/contracts';
import { TempPostgres, describePostgres, useTestPostgres } from '@runledger/testing';
import { EventStore } from '../event-store';
import { PgEventStore } from '../postgres/pg-event-store';
import { SqliteEventStore } from '../sqlite/sqlite-event-store';
import { TempSqlite, createTempSqlite } from '../testing/sqlite';
import { KeyWrap, KeyWrapError } from './key-wrap';
import { eraseSessionKeys, eraseStreamKeys } from './pg-data-keys';
import { SqliteDataKeys, dataKeysPath } from './sqlite-data-keys';

const SECRET = 'Ada Lovelace lives at 12 Secret Lane';
const ANSWER = 'the answer for Ada: 42 bananas';

const received = (session: string): NewEvent =>
  ({ type: 'TASK_RECEIVED', payload: { input: SECRET, session_id: session } }) as NewEvent;
const chunk = (delta: string): NewEvent =>
  ({ type: 'OUTPUT_CHUNK', payload: { call_id: 'call_1', index: 0, delta } }) as NewEvent;
const completed = (): NewEvent =>
  ({
    type: 'TASK_COMPLETED',
    payload: { stop_reason: 'completed', detail: 'ok', usage: emptyUsage(), result: ANSWER },
  }) as NewEvent;

/** Every byte of every file in the folder (database, WAL, keys), as latin1 text to search. */
const filesText = (dir: string): string =>
  readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((d) => d.isFile())
    .map((d) => readFileSync(join(d.parentPath, d.name)).toString('latin1'))
    .join('\n');

/** A memory tool's insert on the system stream, made for a task of a session. */
const memoryInsert = (session: string, taskId: string, text: string): NewEvent =>
  ({
    type: 'MEMORY_WRITTEN',
    session_id: session,
    payload: {
      op: 'insert',
      entry_id: `mem_${taskId}`,
      kind: 'fact',
      text,
      weight: 0.5,
      previous_weight: null,
      source: 'user',
      source_event_id: null,
      reason: 'said so',
      embedding_model: 'hash',
      embedding_dim: 8,
      metadata: { task_id: taskId, session_id: session },
    },
  }) as NewEvent;

interface Harness {
  store: EventStore;
  /** destroy the session's keys as another process would */
  erase(session: string): Promise<void>;
  /** destroy the keys of a task tree's streams as another process would */
  eraseTree(session: string, streams: string[]): Promise<void>;
  /** the stored payload texts of a task */
  storedPayloads(taskId: string): Promise<string[]>;
  close(): Promise<void>;
}

function sealingSuite(name: string, open: (seal: boolean) => Promise<Harness>, dir?: () => string) {
  describe(name, () => {
    let h: Harness;
    afterEach(async () => h?.close());

    const write = async (taskId: string, session: string) => {
      await h.store.append(taskId, [received(session), chunk(`hello ${SECRET}`)], { expected: 'no_stream' });
      await h.store.append(taskId, [completed()], { expected: 2 });
    };

    it('stores personal fields sealed and serves them in clear, raw and parsed alike', async () => {
      h = await open(true);
      await write('t1', 'ses_a');
      const stored = await h.storedPayloads('t1');
      expect(stored.join('\n')).not.toContain('Ada');
      expect(JSON.parse(stored[0])).toMatchObject({ input: '[sealed]', session_id: 'ses_a', budgets: {} });
      expect(JSON.parse(stored[2])).toMatchObject({ stop_reason: 'completed', result: '[sealed]' });
      const events = await h.store.readStream('t1');
      expect(events.map((e) => e.payload)).toMatchObject([
        { input: SECRET, session_id: 'ses_a' },
        { call_id: 'call_1', index: 0, delta: `hello ${SECRET}` },
        { stop_reason: 'completed', detail: 'ok', usage: emptyUsage(), result: ANSWER },
      ]);
      const raw = await h.store.readStreamRaw('t1');
      expect(raw.map((r) => r.json)).toEqual(events.map((e) => JSON.stringify(e)));
      expect((await h.store.readAll()).map((e) => e.payload)).toEqual(events.map((e) => e.payload));
      expect((await h.store.readAllRaw()).map((r) => r.json)).toEqual(raw.map((r) => r.json));
      if (dir) expect(filesText(dir())).not.toContain('Lovelace');
    });

    it('after erasure every read marks the content erased, other sessions read as before, the session takes no more events', async () => {
      h = await open(true);
      await write('t1', 'ses_a');
      await write('t2', 'ses_b');
      await h.erase('ses_a');
      const events = await h.store.readStream('t1');
      expect(events.map((e) => e.type)).toEqual(['TASK_RECEIVED', 'OUTPUT_CHUNK', 'TASK_COMPLETED']);
      expect(events[0].payload).toMatchObject({
        input: ERASED_VALUE,
        session_id: 'ses_a',
        $erased: 'erased',
      });
      expect(events[1].payload).toEqual({
        call_id: 'call_1',
        index: 0,
        delta: ERASED_VALUE,
        $erased: 'erased',
      });
      expect(events[2].payload).toMatchObject({ stop_reason: 'completed', result: ERASED_VALUE });
      const raw = await h.store.readStreamRaw('t1');
      expect(raw.map((r) => JSON.parse(r.json) as RuntimeEvent)).toEqual(events);
      const all = await h.store.readAll();
      expect(JSON.stringify(all.filter((e) => e.session_id === 'ses_a'))).not.toContain('Ada');
      expect(JSON.stringify(all).split(SECRET).length - 1).toBe(2); // ses_b's own two
      expect((await h.store.readStream('t2'))[0].payload).toMatchObject({
        input: SECRET,
        session_id: 'ses_b',
      });
      await expect(
        h.store.append('t3', [received('ses_a')], { expected: 'no_stream' }),
      ).rejects.toBeInstanceOf(IllegalStateError);
      // the refused append wrote nothing, and ses_b still writes
      expect(await h.store.readStream('t3')).toEqual([]);
      await h.store.append('t4', [received('ses_b')], { expected: 'no_stream' });
    });

    it("seals the read models' copies under the session's key, opens them in one look, and reads them gone after erasure", async () => {
      h = await open(true);
      await write('t1', 'ses_a');
      await write('t2', 'ses_b');
      const a = await h.store.sealCopy({ session_id: 'ses_a', stream_id: 't1' }, `row of ${SECRET}`);
      const b = await h.store.sealCopy({ session_id: 'ses_b', stream_id: 't2' }, `row of ${SECRET}`);
      expect(a).not.toContain('Ada');
      expect(JSON.parse(a)).toMatchObject({ session_id: 'ses_a', stream_id: 't1' });
      expect(await h.store.sealCopy({ session_id: 'system:memory', stream_id: null }, 'system text')).toBe(
        'system text',
      );
      expect(await h.store.openCopies([a, null, 'as stored', b])).toEqual([
        `row of ${SECRET}`,
        null,
        'as stored',
        `row of ${SECRET}`,
      ]);
      // a person's own text that merely begins like a sealed one is clear text
      const lookalikes = ['{"$sealed": not json', '{"$sealed":"v1","session_id":"ses_a","more":1}'];
      expect(await h.store.openCopies(lookalikes)).toEqual(lookalikes);
      // a tree's erasure takes its copies; the same session's other tree keeps its own
      await write('t3', 'ses_a');
      const c = await h.store.sealCopy({ session_id: 'ses_a', stream_id: 't3' }, `row of ${SECRET}`);
      await h.eraseTree('ses_a', ['t1']);
      expect(await h.store.openCopies([a, b, c])).toEqual([null, `row of ${SECRET}`, `row of ${SECRET}`]);
      await h.erase('ses_a');
      expect(await h.store.openCopies([a, b, c])).toEqual([null, `row of ${SECRET}`, null]);
      // a copy made from the erased session's (erased) events holds nothing and is stored as it is
      expect(await h.store.sealCopy({ session_id: 'ses_a', stream_id: 't1' }, ERASED_VALUE)).toBe(
        ERASED_VALUE,
      );
    });

    /** received and a chunk: a task not ended, whose stream still takes events */
    const start = (taskId: string, session: string) =>
      h.store.append(taskId, [received(session), chunk(`hello ${SECRET}`)], { expected: 'no_stream' });
    const delivery = (session: string): NewEvent =>
      ({ ...chunk(`delivered ${SECRET}`), session_id: session }) as NewEvent;

    it("a task tree is erased alone: its streams read erased and refuse appends, the same session's other tree reads in clear and takes new tasks", async () => {
      h = await open(true);
      await write('root_a', 'ses_a');
      await start('child_a', 'ses_a');
      await h.store.append('outbound:root_a', [delivery('ses_a')], { expected: 'no_stream' });
      await start('root_b', 'ses_a');
      await h.store.append(
        'system:memory',
        [
          memoryInsert('ses_a', 'child_a', `${SECRET} likes tea`),
          memoryInsert('ses_a', 'root_b', 'B likes coffee'),
        ],
        { expected: 'any' },
      );
      expect((await h.storedPayloads('system:memory')).join('\n')).not.toContain('tea');
      expect((await h.storedPayloads('outbound:root_a')).join('\n')).not.toContain('Ada');
      expect(JSON.stringify(await h.store.readAll())).toContain(`${SECRET} likes tea`);
      await h.eraseTree('ses_a', ['root_a', 'child_a', 'outbound:root_a']);
      for (const id of ['root_a', 'child_a', 'outbound:root_a']) {
        const events = await h.store.readStream(id);
        expect(events[0].payload).toHaveProperty('$erased', 'erased');
        expect(JSON.stringify(events)).not.toContain('Ada');
        expect((await h.store.readStreamRaw(id)).map((r) => r.json).join('')).not.toContain('Ada');
      }
      expect((await h.store.readStream('root_a'))[0].payload).toMatchObject({
        input: ERASED_VALUE,
        session_id: 'ses_a',
      });
      const other = await h.store.readStream('root_b');
      expect(other[0].payload).toEqual(expect.objectContaining({ input: SECRET, session_id: 'ses_a' }));
      expect(other[0].payload).not.toHaveProperty('$erased');
      const all = await h.store.readAll();
      const memory = all.filter((e) => e.task_id === 'system:memory').map((e) => e.payload);
      expect(memory).toEqual([
        expect.objectContaining({ text: ERASED_VALUE, $erased: 'erased' }),
        expect.objectContaining({
          text: 'B likes coffee',
          metadata: { task_id: 'root_b', session_id: 'ses_a' },
        }),
      ]);
      // root_b's input and chunk hold the secret; nothing of the erased tree does
      expect(JSON.stringify(all).split(SECRET).length - 1).toBe(2);
      expect(
        (await h.store.readAllRaw())
          .map((r) => r.json)
          .join('')
          .split(SECRET).length - 1,
      ).toBe(2);
      // the erased tree's open streams take no more events, and nothing is written
      await expect(h.store.append('child_a', [chunk('more')], { expected: 2 })).rejects.toThrow(
        /erased task tree/,
      );
      await expect(h.store.append('outbound:root_a', [delivery('ses_a')], { expected: 1 })).rejects.toThrow(
        /erased task tree/,
      );
      await expect(
        h.store.append('system:memory', [memoryInsert('ses_a', 'child_a', 'again')], { expected: 'any' }),
      ).rejects.toThrow(/erased task tree/);
      expect((await h.store.readStream('child_a')).length).toBe(2);
      // the session goes on: its other tree and a new one take events
      await h.store.append('root_b', [chunk('more')], { expected: 2 });
      await write('root_c', 'ses_a');
      expect((await h.store.readStream('root_c'))[0].payload).toMatchObject({ input: SECRET });
      // erasing the session afterwards takes the rest
      await h.erase('ses_a');
      expect(JSON.stringify(await h.store.readAll())).not.toContain('Ada');
      await expect(h.store.append('root_b', [chunk('more')], { expected: 3 })).rejects.toThrow(/was erased/);
    });

    it("a tree written in clear (before sealing was on) reads erased once erased; its session's other tree does not", async () => {
      h = await open(false);
      await start('root_a', 'ses_a');
      await start('root_b', 'ses_a');
      await h.eraseTree('ses_a', ['root_a']);
      expect((await h.store.readStream('root_a'))[0].payload).toMatchObject({
        input: ERASED_VALUE,
        $erased: 'erased',
      });
      expect((await h.store.readStreamRaw('root_a')).map((r) => r.json).join('')).not.toContain('Ada');
      expect((await h.store.readStream('root_b'))[0].payload).toMatchObject({ input: SECRET });
      await expect(h.store.append('root_a', [chunk('x')], { expected: 2 })).rejects.toThrow(
        /erased task tree/,
      );
      await h.store.append('root_b', [chunk('x')], { expected: 2 });
    });

    it('events stored in clear (before sealing was on) read as erased once their session is erased', async () => {
      h = await open(false);
      await write('t1', 'ses_a');
      expect((await h.storedPayloads('t1')).join('\n')).toContain('Ada');
      expect((await h.store.readStream('t1'))[0].payload).toMatchObject({
        input: SECRET,
        session_id: 'ses_a',
      });
      await h.erase('ses_a');
      const events = await h.store.readStream('t1');
      expect(events[0].payload).toMatchObject({
        input: ERASED_VALUE,
        session_id: 'ses_a',
        accept_checks: [],
        $erased: 'erased',
      });
      expect((await h.store.readStreamRaw('t1')).map((r) => r.json).join('')).not.toContain('Ada');
      expect(JSON.stringify(await h.store.readAllRaw())).not.toContain('Ada');
    });
  });
}

describe('sealed payloads and erasure on SQLite', () => {
  let temp: TempSqlite | null = null;
  afterEach(async () => {
    await temp?.dispose();
    temp = null;
  });

  for (const mode of ['inline', 'thread'] as const) {
    sealingSuite(
      `SQLite, appends ${mode}`,
      async (seal) => {
        temp = await createTempSqlite();
        const store = new SqliteEventStore(temp.handle, {
          sealPayloads: seal,
          ...(mode === 'thread' ? { writerThread: {} } : {}),
        });
        await store.ready();
        const path = temp.path;
        const raw = temp.handle.raw;
        return {
          store,
          async erase(session) {
            // another connection, as `runledger erase` in another process has
            const keys = new SqliteDataKeys(dataKeysPath(path));
            keys.eraseSession(session, new Date().toISOString());
            keys.close();
          },
          async eraseTree(session, streams) {
            const keys = new SqliteDataKeys(dataKeysPath(path));
            keys.eraseStreams(session, streams, new Date().toISOString());
            keys.close();
          },
          async storedPayloads(taskId) {
            return raw
              .prepare<[string], { payload: string }>(
                'SELECT payload FROM events WHERE task_id = ? ORDER BY sequence',
              )
              .all(taskId)
              .map((r) => r.payload);
          },
          close: () => store.close(),
        };
      },
      () => temp!.dir,
    );
  }

  it('a sealing store zeroes freed pages (secure_delete) on its connection; a clear one leaves the default', async () => {
    temp = await createTempSqlite();
    const store = new SqliteEventStore(temp.handle, { sealPayloads: true });
    expect(temp.handle.raw.pragma('secure_delete', { simple: true })).toBe(1);
    await store.close();
    const other = await createTempSqlite();
    try {
      const clear = new SqliteEventStore(other.handle);
      expect(other.handle.raw.pragma('secure_delete', { simple: true })).toBe(0);
      await clear.close();
    } finally {
      await other.dispose();
    }
  });

  it('with a key-encryption key no raw data key is in the key files; a wrapped store refuses to open without it or with another', async () => {
    temp = await createTempSqlite();
    const dir = join(temp.path, '..');
    const keyFiles = () =>
      Buffer.concat(
        readdirSync(dir)
          .filter((f) => f.includes('.keys'))
          .map((f) => readFileSync(join(dir, f))),
      );
    const owner = (stream: string) => ({ session_id: 'ses_a', stream_id: stream });
    const kek = randomBytes(32);
    // written raw first (no key-encryption key), then opened with one: the raw keys are wrapped
    const raw = new SqliteEventStore(temp.handle, { sealPayloads: true });
    await raw.append('t1', [received('ses_a')], { expected: 'no_stream' });
    const first = new SqliteDataKeys(dataKeysPath(temp.path), 5000, null).existingKey(owner('t1'));
    if (!first || first === 'erased') throw new Error('no key was created');
    expect(keyFiles().includes(first.key)).toBe(true);
    await raw.close();
    const handle = temp.handle;
    const store = new SqliteEventStore(handle, { sealPayloads: true, keyEncryptionKey: kek });
    try {
      expect(keyFiles().includes(first.key)).toBe(false);
      expect((await store.readStream('t1'))[0].payload).toMatchObject({ input: SECRET });
      await store.append('t2', [received('ses_a')], { expected: 'no_stream' });
      const keys = new SqliteDataKeys(dataKeysPath(temp.path), 5000, new KeyWrap(kek));
      const second = keys.existingKey(owner('t2'));
      keys.close();
      if (!second || second === 'erased') throw new Error('no key was created');
      expect(keyFiles().includes(second.key)).toBe(false);
      expect((await store.readStream('t2'))[0].payload).toMatchObject({ input: SECRET });
      // without the key-encryption key, or with another, the key file does not open
      expect(() => new SqliteDataKeys(dataKeysPath(temp!.path), 5000, null).refresh()).toThrow(
        /wrapped by a key-encryption key .*RUNLEDGER_ERASURE_KEY_FILE/,
      );
      expect(() => new SqliteEventStore(handle, { sealPayloads: true })).toThrow(KeyWrapError);
      expect(
        () => new SqliteEventStore(handle, { sealPayloads: true, keyEncryptionKey: randomBytes(32) }),
      ).toThrow(/not by RUNLEDGER_ERASURE_KEY_FILE/);
    } finally {
      await store.close();
    }
  });

  /** Looks at the disk for `<db>.keys` made while `work` runs. */
  const keyFileLooks = async (work: () => Promise<unknown>): Promise<number> => {
    const exists = jest.spyOn(fs, 'existsSync');
    try {
      await work();
      return exists.mock.calls.filter(([p]) => String(p).endsWith('.keys')).length;
    } finally {
      exists.mockRestore();
    }
  };

  for (const mode of ['inline', 'thread'] as const)
    it(`appends (${mode}) look for a key file that is not there only once another connection committed to the database`, async () => {
      temp = await createTempSqlite();
      const store = new SqliteEventStore(temp.handle, mode === 'thread' ? { writerThread: {} } : {});
      await store.ready();
      await store.append('t1', [received('ses_a')], { expected: 'no_stream' });
      const appends = async (from: number, n: number) => {
        for (let i = 0; i < n; i++) await store.append('t1', [chunk(`c${i}`)], { expected: from + i });
      };
      // in the thread the look is not this thread's: counted by what it lets through below
      if (mode === 'inline') expect(await keyFileLooks(() => appends(1, 5))).toBe(0);
      else await appends(1, 5);
      // another process erases the session: the key file with its tombstone, then its record in the
      // database (an erasure scrubs and records after destroying the keys)
      const keysModule = join(__dirname, 'sqlite-data-keys.ts');
      execFileSync(
        process.execPath,
        [
          '-r',
          join(__dirname, '..', 'thread-register.js'),
          '-e',
          `const { SqliteDataKeys } = require(${JSON.stringify(keysModule)});
           const keys = new SqliteDataKeys(${JSON.stringify(dataKeysPath(temp.path))});
           keys.eraseSession('ses_a', new Date().toISOString());
           keys.close();
           const Database = require('better-sqlite3');
           const db = new Database(${JSON.stringify(temp.path)});
           db.prepare("INSERT INTO events (event_id, task_id, session_id, sequence, type, payload, causation_id, correlation_id, created_at, schema_version) VALUES ('evt_erased', 'system:erasure', 'system:erasure', 1, 'SESSION_ERASED', ?, NULL, 'system:erasure', ?, 1)")
             .run(JSON.stringify({ session_id: 'ses_a', task_ids: ['t1'], erased_at: new Date().toISOString() }), new Date().toISOString());
           db.close();`,
        ],
        { cwd: join(__dirname, '..', '..', '..', '..'), stdio: 'pipe' },
      );
      await expect(store.append('t1', [chunk('after')], { expected: 6 })).rejects.toThrow(IllegalStateError);
      expect((await store.readStream('t1'))[0].payload).toMatchObject({ input: ERASED_VALUE });
      await store.close();
    });

  it('the destroyed key is gone from the key file, and the keys file is private', async () => {
    temp = await createTempSqlite();
    const store = new SqliteEventStore(temp.handle, { sealPayloads: true });
    await store.append('t1', [received('ses_a')], { expected: 'no_stream' });
    const keys = new SqliteDataKeys(dataKeysPath(temp.path));
    keys.refresh();
    const key = keys.existingKey({ session_id: 'ses_a', stream_id: 't1' });
    if (!key || key === 'erased') throw new Error('no key was created');
    const keyBytes = () =>
      Buffer.concat(
        readdirSync(join(temp!.path, '..'))
          .filter((f) => f.includes('.keys'))
          .map((f) => readFileSync(join(temp!.path, '..', f))),
      );
    expect(keyBytes().includes(key.key)).toBe(true);
    expect(keys.eraseSession('ses_a', new Date().toISOString())).toBe(true);
    expect(keys.eraseSession('ses_a', new Date().toISOString())).toBe(false);
    keys.close();
    expect(keyBytes().includes(key.key)).toBe(false);
    expect(readFileSync(dataKeysPath(temp.path)).length).toBeGreaterThan(0);
    expect((await import('node:fs')).statSync(dataKeysPath(temp.path)).mode & 0o777).toBe(0o600);
    await store.close();
  });
});

describePostgres('sealed payloads and erasure on PostgreSQL', () => {
  const pg = useTestPostgres();
  let db: TempPostgres | null = null;
  afterEach(async () => {
    await db?.dispose();
    db = null;
  });

  sealingSuite('PostgreSQL', async (seal) => {
    db = await pg.freshSchema();
    const handle = db.handle;
    const store = new PgEventStore(handle, { sealPayloads: seal });
    return {
      store,
      async erase(session) {
        await eraseSessionKeys(handle.pool, session, new Date().toISOString());
      },
      async eraseTree(session, streams) {
        await eraseStreamKeys(handle.pool, session, streams, new Date().toISOString());
      },
      async storedPayloads(taskId) {
        const { rows } = await handle.pool.query<{ payload: string }>(
          'SELECT payload FROM events WHERE task_id = $1 ORDER BY sequence',
          [taskId],
        );
        return rows.map((r) => r.payload);
      },
      close: () => store.close(),
    };
  });
});
