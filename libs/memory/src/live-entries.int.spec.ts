import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { Kysely } from 'kysely';
import { MemoryKind } from '@runledger/contracts';
import { SqliteEventStore, SqliteHandle, openSqlite } from '@runledger/event-store';
import { migrateToLatest } from '@runledger/migrations';
import { HashingEmbedder } from './embedder';
import { MemoryDatabase, MemoryFilter, MemoryStore } from './memory-store';
import { MEMORY_SYSTEM_STREAM, MemorySearchHit, MemoryService, MemoryServiceOptions } from './memory-service';

interface Env {
  dir: string;
  handle: SqliteHandle;
  events: SqliteEventStore;
  store: MemoryStore;
}

async function openEnv(): Promise<Env> {
  const dir = mkdtempSync(join(tmpdir(), 'rl-mem-live-'));
  const handle = openSqlite({ path: join(dir, 'runledger.db'), synchronous: 'OFF' });
  await migrateToLatest(handle.db);
  const store = new MemoryStore(handle.db as unknown as Kysely<MemoryDatabase>);
  return { dir, handle, events: new SqliteEventStore(handle), store };
}

async function closeEnv(env: Env): Promise<void> {
  await env.events.close();
  await env.handle.close();
  rmSync(env.dir, { recursive: true, force: true });
}

const openService = (env: Env, over: Partial<MemoryServiceOptions> = {}) =>
  MemoryService.open({
    store: env.store,
    events: env.events,
    embedder: new HashingEmbedder(),
    indexPath: null,
    exactScanBelow: 10_000,
    ...over,
  });

const WORDS = [
  'deploy',
  'cache',
  'queue',
  'port',
  'nightly',
  'backup',
  'script',
  'staging',
  'tests',
  'sqlite',
];
const KINDS: MemoryKind[] = ['fact', 'tool_result', 'plan'];
const SESSIONS = ['s1', 's2'];
const TASKS = ['t1', 't2'];

const text = fc
  .array(fc.constantFrom(...WORDS), { minLength: 1, maxLength: 4 })
  .map((words) => words.join(' '));
const weight = fc.integer({ min: 0, max: 20 }).map((n) => n / 20);

type Op =
  | {
      op: 'insert';
      text: string;
      kind: MemoryKind;
      weight: number;
      session_id: string | null;
      task_id: string | null;
    }
  | { op: 'remember'; text: string; kind: MemoryKind; weight: number }
  | { op: 'delete'; nth: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant('insert' as const),
      text,
      kind: fc.constantFrom(...KINDS),
      weight,
      session_id: fc.option(fc.constantFrom(...SESSIONS)),
      task_id: fc.option(fc.constantFrom(...TASKS)),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('remember' as const),
      text,
      kind: fc.constantFrom(...KINDS),
      weight,
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('delete' as const), nth: fc.nat() }) },
);

const query = fc.record({
  text,
  k: fc.integer({ min: 0, max: 12 }),
  kind: fc.option(fc.constantFrom(...KINDS), { nil: undefined }),
  session_id: fc.option(fc.constantFrom(...SESSIONS, 's-none'), { nil: undefined }),
  task_id: fc.option(fc.constantFrom(...TASKS), { nil: undefined }),
  min_weight: fc.option(weight, { nil: undefined }),
});

async function write(sut: MemoryService, live: string[], o: Op): Promise<void> {
  if (o.op === 'insert') {
    const { text, kind, weight, session_id, task_id } = o;
    const entry = await sut.insert({
      text,
      kind,
      weight,
      session_id,
      task_id,
      source: 'user',
      reason: 'property',
    });
    live.push(entry.id);
  } else if (o.op === 'remember') {
    const { text, kind, weight } = o;
    const { op, entry } = await sut.remember({ text, kind, weight, source: 'user', reason: 'property' });
    if (op === 'insert') live.push(entry.id);
  } else if (live.length > 0) {
    const [id] = live.splice(o.nth % live.length, 1);
    await sut.delete(id, 'property');
  }
}

const comparable = (hits: MemorySearchHit[]) =>
  hits.map((h) => ({ entry: h.entry, similarity: h.similarity, score: h.score }));

const CACHE_FACT = {
  text: 'the cache is flushed nightly',
  kind: 'fact',
  source: 'user',
  weight: 0.5,
  reason: 't',
} as const;

describe('live entries in memory (the exact scan without SQL)', () => {
  let env: Env;
  beforeEach(async () => {
    env = await openEnv();
  });
  afterEach(async () => {
    await closeEnv(env);
  });

  it('search and nearest answered from memory equal the answers read from the table, for any writes and filters', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(op, { minLength: 1, maxLength: 25 }),
        fc.array(query, { minLength: 1, maxLength: 6 }),
        async (ops, queries) => {
          const local = await openEnv();
          const inMemory = await openService(local);
          const fromTable = await openService(local, { keepLiveEntries: false });
          try {
            const live: string[] = [];
            for (const o of ops) await write(inMemory, live, o);
            for (const { text: q, ...options } of queries) {
              expect(comparable(await inMemory.search(q, options))).toEqual(
                comparable(await fromTable.search(q, options)),
              );
            }
            for (const kind of KINDS) {
              const vector = await inMemory.embed(queries[0].text);
              // few entries are scanned exactly in memory (double precision), the table's through the index
              // (float): the same nearest entry, or one exactly as similar, with the same similarity
              const [exact, indexed] = [
                await inMemory.nearest(vector, kind),
                await fromTable.nearest(vector, kind),
              ];
              expect(exact === null).toBe(indexed === null);
              if (exact && indexed) {
                expect(exact.similarity).toBeCloseTo(indexed.similarity, 5);
                if (exact.entry_id === indexed.entry_id)
                  expect({ ...exact, similarity: 0 }).toEqual({ ...indexed, similarity: 0 });
              }
            }
          } finally {
            await inMemory.close();
            await fromTable.close();
            await closeEnv(local);
          }
        },
      ),
      { numRuns: 30 },
    );
  });

  it('below the limit searches read no table; past it the copy is dropped and the table answers again', async () => {
    const withVectors = jest.spyOn(env.store, 'withVectors');
    const sut = await openService(env, { exactScanBelow: 3 });
    const filter: MemoryFilter = { kind: 'fact' };
    const fact = (t: string, w = 0.5) => ({
      text: t,
      kind: 'fact' as const,
      source: 'user' as const,
      weight: w,
      reason: 't',
    });
    const ids: string[] = [];
    for (const t of ['deploy script in ops', 'cache flushed nightly', 'queue owned by billing'])
      ids.push((await sut.insert(fact(t))).id);
    withVectors.mockClear();
    const few = await sut.search('where is the deploy script', { k: 2, ...filter });
    expect(few.map((h) => h.entry.text)).toEqual(['deploy script in ops', expect.any(String)]);
    expect(await sut.nearest(await sut.embed('cache flushed nightly'), 'fact')).toMatchObject({
      entry_id: ids[1],
      similarity: expect.closeTo(1, 6),
    });
    expect(withVectors).not.toHaveBeenCalled();

    await sut.insert(fact('backups kept thirty days', 0.9));
    // four facts: over the limit, so the index answers unfiltered; this filter leaves one, scanned from the table
    const many = await sut.search('backups kept', { k: 1, ...filter, min_weight: 0.8 });
    expect(many.map((h) => h.entry.text)).toEqual(['backups kept thirty days']);
    expect(withVectors).toHaveBeenCalled();
    await sut.close();
  });

  it('reinforce and delete reach the entries in memory', async () => {
    const sut = await openService(env);
    const fact = {
      text: 'the cache is flushed nightly',
      kind: 'fact' as const,
      source: 'user' as const,
      reason: 't',
    };
    const first = await sut.insert({ ...fact, weight: 0.4 });
    const again = await sut.remember({ ...fact, weight: 0.4 });
    expect(again.op).toBe('reinforce');
    const [hit] = await sut.search('cache flushed', { k: 1 });
    expect(hit.entry).toEqual(again.entry);
    expect(hit.entry.weight).toBeGreaterThan(first.weight);
    expect(await sut.search('cache flushed', { k: 1, min_weight: again.entry.weight + 0.01 })).toEqual([]);

    await sut.delete(first.id, 'obsolete');
    expect(await sut.search('cache flushed', { k: 1 })).toEqual([]);
    expect(await sut.nearest(await sut.embed(fact.text), 'fact')).toBeNull();
    await sut.close();
  });

  it('a reopened service loads the live entries from the table, tombstones left out', async () => {
    const first = await openService(env);
    const kept = await first.insert({
      text: 'port 6543 for staging',
      kind: 'fact',
      source: 'user',
      weight: 0.7,
      reason: 't',
    });
    const gone = await first.insert({
      text: 'port 5432 for staging',
      kind: 'fact',
      source: 'user',
      weight: 0.7,
      reason: 't',
    });
    await first.delete(gone.id, 'obsolete');
    await first.close();

    const withVectors = jest.spyOn(env.store, 'withVectors');
    const sut = await openService(env);
    expect(withVectors).toHaveBeenCalledTimes(1);
    const hits = await sut.search('which port does staging use', { k: 5 });
    expect(hits.map((h) => h.entry)).toEqual([kept]);
    expect(withVectors).toHaveBeenCalledTimes(1);
    await sut.close();
  });
});

describe('MemoryService sync and apply', () => {
  let env: Env;
  beforeEach(async () => {
    env = await openEnv();
  });
  afterEach(async () => {
    await closeEnv(env);
  });

  const payload = (sut: MemoryService, text: string) =>
    sut.insertPayload({ text, kind: 'fact', source: 'user', weight: 0.5, reason: 't' }, null);

  it('applies a pass of writes with one checkpoint, and applying the pass again after a crash changes nothing', async () => {
    const sut = await openService(env);
    const setCheckpoint = jest.spyOn(env.store, 'setCheckpoint');
    const { positions } = await env.events.append(
      MEMORY_SYSTEM_STREAM,
      ['a', 'b', 'c'].map((t) => ({
        type: 'MEMORY_WRITTEN' as const,
        session_id: 'system',
        payload: payload(sut, `the ${t} service owns its queue`),
      })),
      { expected: 'any' },
    );
    const before = await sut.list({}, 10);
    expect(before).toHaveLength(3);
    expect(setCheckpoint.mock.calls).toEqual([[positions[2]]]);
    expect(await env.store.checkpoint()).toBe(positions[2]);
    await sut.close();

    // a crash before the checkpoint: the next open applies the same events again
    await env.store.db.deleteFrom('memory_projection').execute();
    const reopened = await openService(env);
    expect(await reopened.list({}, 10)).toEqual(before);
    expect(await env.store.checkpoint()).toBe(positions[2]);
    await reopened.close();
  });

  it('a sync with nothing new committed reads the log only after the last event it heard of; a `heard` one not at all', async () => {
    const sut = await openService(env);
    await sut.insert(CACHE_FACT);
    const { positions } = await env.events.append(
      'task_x',
      [{ type: 'TASK_RECEIVED', session_id: 'sx', payload: { input: 'hello', session_id: 'sx' } as never }],
      { expected: 'no_stream' },
    );
    const readAll = jest.spyOn(env.events, 'readAll');
    await sut.search('cache', { k: 1 });
    await sut.nearest(await sut.embed('cache'), 'fact');
    await sut.search('cache', { k: 1, freshness: 'heard' });
    expect(readAll.mock.calls.map(([o]) => o?.after_position)).toEqual([positions[0]]);
    await sut.close();
  });

  it('searches arriving together share one pass over the log, and a write committed while it runs is found by the next', async () => {
    const sut = await openService(env);
    await sut.insert(CACHE_FACT);
    const readAll = jest.spyOn(env.events, 'readAll');
    const together = await Promise.all(
      Array.from({ length: 5 }, () => sut.search('cache flushed', { k: 1 })),
    );
    expect(together.map((hits) => hits.map((h) => h.entry.text))).toEqual(
      Array(5).fill(['the cache is flushed nightly']),
    );
    expect(readAll).toHaveBeenCalledTimes(1);

    const running = sut.search('cache flushed', { k: 5 });
    await env.events.append(
      MEMORY_SYSTEM_STREAM,
      [{ type: 'MEMORY_WRITTEN', session_id: 'system', payload: payload(sut, 'the cache lives on the ssd') }],
      { expected: 'any' },
    );
    await running;
    expect((await sut.search('cache', { k: 5 })).map((h) => h.entry.text).sort()).toEqual([
      'the cache is flushed nightly',
      'the cache lives on the ssd',
    ]);
    await sut.close();
  });

  it("another process's write on the same file is found by the next search, before its commit is published here", async () => {
    const sut = await openService(env);
    // a second connection to the file, as another process has: its commits reach this one's listener only by polling
    const otherHandle = openSqlite({ path: join(env.dir, 'runledger.db'), synchronous: 'OFF' });
    const otherEvents = new SqliteEventStore(otherHandle, { foreignCommitPollMs: 0 });
    const other = await MemoryService.open({
      store: new MemoryStore(otherHandle.db as unknown as Kysely<MemoryDatabase>),
      events: otherEvents,
      embedder: new HashingEmbedder(),
      indexPath: null,
    });
    try {
      await sut.insert({
        text: 'deploys happen on tuesdays',
        kind: 'fact',
        source: 'user',
        weight: 0.5,
        reason: 't',
      });
      await other.insert({
        text: 'the staging database listens on port 6543',
        kind: 'fact',
        source: 'user',
        weight: 0.5,
        reason: 't',
      });
      expect((await sut.search('which port does the staging database use', { k: 1 }))[0].entry.text).toBe(
        'the staging database listens on port 6543',
      );
      expect((await other.search('when do deploys happen', { k: 1 }))[0].entry.text).toBe(
        'deploys happen on tuesdays',
      );
    } finally {
      await other.close();
      await otherEvents.close();
      await otherHandle.close();
    }
  });
});
