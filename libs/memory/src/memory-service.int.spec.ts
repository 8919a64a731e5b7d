import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemoryKind, NewEvent, RuntimeEvent } from '@runledger/contracts';
import { SqliteEventStore, SqliteHandle, openSqlite } from '@runledger/event-store';
import { migrateToLatest } from '@runledger/migrations';
import { Embedder, HashingEmbedder } from './embedder';
import { MemoryDatabase, MemoryStore } from './memory-store';
import { MEMORY_SYSTEM_STREAM, MemoryService, MemoryServiceOptions } from './memory-service';
import { FLAT_UP_TO, VectorIndex } from './vector-index';
import { HeuristicCritic, ModelCritic } from '@runledger/critic';
import { createCriticMemoryHook } from './memory-hook';
import { ToolOutcomeEvent } from './memory-write-policy';

interface Env {
  dir: string;
  dbPath: string;
  indexPath: string;
  handle: SqliteHandle;
  events: SqliteEventStore;
}

const TOPICS = [
  'swc compiles typescript fast',
  'jest runs the unit tests',
  'sqlite stores the event log',
  'hnsw finds nearest vectors',
  'nestjs serves the http api',
  'bubblewrap sandboxes tools',
  'kysely builds sql queries',
  'zod validates the payloads',
];

async function openEnv(dir: string): Promise<Env> {
  const dbPath = join(dir, 'runledger.db');
  const handle = openSqlite({ path: dbPath, synchronous: 'NORMAL' });
  await migrateToLatest(handle.db);
  return { dir, dbPath, indexPath: join(dir, 'memory.hnsw'), handle, events: new SqliteEventStore(handle) };
}

const openService = (
  env: Env,
  over: Partial<MemoryServiceOptions> = {},
  embedder: Embedder = new HashingEmbedder(),
) =>
  MemoryService.open({
    store: new MemoryStore(env.handle.db as unknown as import('kysely').Kysely<MemoryDatabase>),
    events: env.events,
    embedder,
    indexPath: env.indexPath,
    // force the HNSW path so these tests exercise the index, not the exact scan
    exactScanBelow: 0,
    ...over,
  });

type WriteOp = 'insert' | 'reinforce' | 'delete';

/** A MEMORY_WRITTEN of a fact as a system write, in `sut`'s embedding. */
const memoryWritten = (sut: MemoryService, op: WriteOp, entry_id: string, text: string, weight: number) =>
  ({
    type: 'MEMORY_WRITTEN',
    session_id: 'system',
    payload: {
      op,
      entry_id,
      kind: 'fact',
      text,
      weight,
      source: 'system',
      source_event_id: null,
      reason: 'test',
      embedding_model: sut.embeddingModel,
      embedding_dim: sut.embeddingDim,
    },
  }) as unknown as NewEvent;

/** The layout the index file at `path` was saved in, from its meta. */
const savedLayout = (path: string): string =>
  (JSON.parse(readFileSync(`${path}.meta.json`, 'utf8')) as { layout: string }).layout;

async function seed(sut: MemoryService, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const text = `${TOPICS[i % TOPICS.length]} (note ${i})`;
    const kind: MemoryKind = i % 3 === 0 ? 'fact' : 'tool_result';
    const entry = await sut.insert({
      text,
      kind,
      source: 'system',
      weight: 0.3 + (i % 7) / 10,
      reason: 'seed',
      session_id: i % 2 ? 's-odd' : 's-even',
    });
    ids.push(entry.id);
  }
  return ids;
}

/** `n` entries in the table and no index file (deleted, or never written), as a rebuild starts from. */
async function seedWithoutIndexFile(env: Env, n: number): Promise<void> {
  const first = await openService(env);
  await seed(first, n);
  await first.close();
  rmSync(env.indexPath);
}

/** Holds the store's named table writes until the returned release: what is heard stays unapplied meanwhile. */
function holdWrites(
  store: MemoryStore,
  names: readonly ('insertIfAbsent' | 'setWeight' | 'tombstone')[],
): () => void {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  for (const name of names) {
    const original = (store[name] as (...a: unknown[]) => Promise<unknown>).bind(store);
    jest.spyOn(store, name).mockImplementation((async (...a: unknown[]) => {
      await held;
      return original(...a);
    }) as never);
  }
  return release;
}

const taskReceivedEvent = (session_id: string): NewEvent =>
  ({
    type: 'TASK_RECEIVED',
    payload: { input: 'heard', session_id },
  }) as NewEvent;

const topIds = async (sut: MemoryService, query: string, k = 5) =>
  (await sut.search(query, { k })).map((h) => h.entry.id);

describe('MemoryService on SQLite + HNSW file', () => {
  let dir: string;
  let env: Env;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rl-mem-'));
    env = await openEnv(dir);
  });
  afterEach(async () => {
    await env.handle.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('ranks by similarity x weight and applies filters', async () => {
    const sut = await openService(env);
    const light = await sut.insert({
      text: 'the deploy script lives in ops/deploy.sh',
      kind: 'fact',
      source: 'user',
      weight: 0.2,
      reason: 't',
    });
    const heavy = await sut.insert({
      text: 'the deploy script lives in ops/deploy.sh now',
      kind: 'fact',
      source: 'user',
      weight: 0.9,
      reason: 't',
      session_id: 's1',
    });
    await sut.insert({
      text: 'unrelated: bananas are yellow',
      kind: 'tool_result',
      source: 'tool',
      weight: 1,
      reason: 't',
    });

    const hits = await sut.search('where is the deploy script', { k: 2 });
    expect(hits.map((h) => h.entry.id)).toEqual([heavy.id, light.id]);
    for (const h of hits) expect(h.score).toBeCloseTo(h.similarity * h.entry.weight, 6);

    expect((await sut.search('deploy script', { k: 5, session_id: 's1' })).map((h) => h.entry.id)).toEqual([
      heavy.id,
    ]);
    expect(
      (await sut.search('deploy script', { k: 5, min_weight: 0.5, kind: 'fact' })).map((h) => h.entry.id),
    ).toEqual([heavy.id]);
    expect(await sut.search('deploy script', { k: 5, kind: 'plan' })).toEqual([]);
    expect(heavy).toMatchObject({
      embedding_model: 'runledger-hash-v1',
      embedding_dim: 384,
      session_id: 's1',
      task_id: null,
    });
    await sut.close();
  });

  it('with a writer thread, a pass applies its entries in one transaction; its position rides in the next commit', async () => {
    const handle = openSqlite({ path: join(dir, 'thread.db'), synchronous: 'NORMAL' });
    await migrateToLatest(handle.db);
    // the position's rider waits long enough for the next append even on a loaded machine
    const events = new SqliteEventStore(handle, { writerThread: {}, groupCommit: { rideMaxWaitMs: 60_000 } });
    await events.ready();
    const store = new MemoryStore(
      handle.db as unknown as import('kysely').Kysely<MemoryDatabase>,
      handle.lazyDb as unknown as import('kysely').Kysely<MemoryDatabase>,
    );
    const sut = await MemoryService.open({
      store,
      events,
      embedder: new HashingEmbedder(),
      indexPath: join(dir, 'thread.hnsw'),
    });
    try {
      const before = events.commitStats();
      const written = await Promise.all(
        TOPICS.map((text) =>
          sut.insert({ text, kind: 'fact', source: 'system', weight: 0.5, reason: 'seed' }),
        ),
      );
      const after = events.commitStats();
      // the 8 appends share one commit, and the pass that applies them one more transaction
      expect(after.commits - before.commits).toBe(1);
      expect(after.transactions - before.transactions).toBe(2);
      expect(new Set(written.map((e) => e.label)).size).toBe(TOPICS.length);
      expect((await sut.search(TOPICS[3], { k: 1 }))[0].entry.text).toBe(TOPICS[3]);
      // the store fills the payload's defaults
      const received = {
        type: 'TASK_RECEIVED',
        payload: { input: 'x', session_id: 's1' },
      } as unknown as NewEvent;
      const { events: marked } = await events.append('t-next', [received], { expected: 'no_stream' });
      expect(events.commitStats().transactions - after.transactions).toBe(1);
      expect(await store.checkpoint()).toBe(marked[0].position - 1);
    } finally {
      await sut.close();
      await events.close();
      await handle.close();
    }
  }, 60_000);

  it('one page applies events of the same entry in log order, others alongside: insert, reinforce, delete', async () => {
    const store = new MemoryStore(env.handle.db as unknown as import('kysely').Kysely<MemoryDatabase>);
    const sut = await openService(env, { store });

    const written = (op: WriteOp, entry_id: string, text: string, weight: number) =>
      memoryWritten(sut, op, entry_id, text, weight);
    await env.events.append(MEMORY_SYSTEM_STREAM, [written('insert', 'mem_d', TOPICS[3], 0.2)], {
      expected: 'any',
    });
    await sut.sync();
    const reads = { one: jest.spyOn(store, 'get'), page: jest.spyOn(store, 'byIds') };
    await env.events.append(
      MEMORY_SYSTEM_STREAM,
      [
        written('insert', 'mem_a', TOPICS[0], 0.3),
        written('reinforce', 'mem_d', TOPICS[3], 0.8),
        written('insert', 'mem_b', TOPICS[1], 0.4),
        written('reinforce', 'mem_a', TOPICS[0], 0.9),
        written('insert', 'mem_c', TOPICS[2], 0.5),
        written('delete', 'mem_b', TOPICS[1], 0.4),
      ],
      { expected: 'any' },
    );
    await sut.sync();
    // a step's entries are read in one statement before it starts (mem_d as a previous pass stored it);
    // an entry's second event goes in the next step, which reads it as the first left it
    expect(reads.page.mock.calls.map(([ids]) => ids)).toEqual([
      ['mem_a', 'mem_d', 'mem_b'],
      ['mem_a', 'mem_c', 'mem_b'],
    ]);
    expect(reads.one).not.toHaveBeenCalled();
    expect(await sut.get('mem_a')).toMatchObject({ weight: 0.9, deleted: false });
    expect(await sut.get('mem_b')).toMatchObject({ deleted: true });
    expect(await sut.get('mem_c')).toMatchObject({ weight: 0.5, deleted: false });
    expect(await sut.get('mem_d')).toMatchObject({ weight: 0.8, deleted: false });
    expect((await sut.search(TOPICS[1], { k: 3 })).map((h) => h.entry.id)).not.toContain('mem_b');
    await sut.close();
  });

  it('a reinforce of an entry no write stored stores it as the reinforce saw it; a deleted one stays deleted', async () => {
    const sut = await openService(env);
    const written = (op: WriteOp, entry_id: string, text: string, weight: number) =>
      memoryWritten(sut, op, entry_id, text, weight);
    // the insert it reinforced was handed over in another task and never committed; mem_gone was deleted
    await env.events.append(
      MEMORY_SYSTEM_STREAM,
      [
        written('reinforce', 'mem_lost', TOPICS[4], 0.7),
        written('insert', 'mem_gone', TOPICS[5], 0.4),
        written('delete', 'mem_gone', TOPICS[5], 0.4),
        written('reinforce', 'mem_gone', TOPICS[5], 0.9),
      ],
      { expected: 'any' },
    );
    await sut.sync();
    expect(await sut.get('mem_lost')).toMatchObject({ text: TOPICS[4], weight: 0.7, deleted: false });
    expect((await sut.search(TOPICS[4], { k: 1 }))[0].entry.id).toBe('mem_lost');
    expect(await sut.get('mem_gone')).toMatchObject({ deleted: true });
    // a reinforce that carries no text (the writes of today name an entry committed before them) stores nothing
    const textless = written('reinforce', 'mem_unseen', TOPICS[6], 0.8);
    delete (textless.payload as { text?: string }).text;
    await env.events.append(MEMORY_SYSTEM_STREAM, [textless], { expected: 'any' });
    await sut.sync();
    expect(await sut.get('mem_unseen')).toBeNull();
    expect(await sut.rebuildFromLog()).toBe(5);
    expect(await sut.get('mem_unseen')).toBeNull();
    expect(await sut.get('mem_lost')).toMatchObject({ text: TOPICS[4], weight: 0.7, deleted: false });
    await sut.close();
  });

  it('an insert without its text is refused and writes nothing', async () => {
    const sut = await openService(env);
    const insert = memoryWritten(sut, 'insert', 'mem_blank', TOPICS[0], 0.5);
    delete (insert.payload as { text?: string }).text;
    await expect(env.events.append(MEMORY_SYSTEM_STREAM, [insert], { expected: 'any' })).rejects.toThrow(
      /text: an insert carries its text/,
    );
    expect(await env.events.readAll({ types: ['MEMORY_WRITTEN'] })).toEqual([]);
    await sut.close();
  });

  it('byIds answers as get does for each id, past one statement of 500, without the vectors', async () => {
    const sut = await openService(env);
    const ids = await seed(sut, 3);
    await sut.sync();
    const store = new MemoryStore(env.handle.db as unknown as import('kysely').Kysely<MemoryDatabase>);
    await store.tombstone(ids[1], new Date().toISOString());
    const asked = [...Array.from({ length: 600 }, (_, i) => `mem_missing_${i}`), ...ids];
    const found = await store.byIds(asked);
    expect([...found.keys()].sort()).toEqual([...ids].sort());
    for (const id of ids) expect(found.get(id)).toEqual(await store.get(id));
    expect(found.get(ids[1])).toMatchObject({ deleted: true });
    expect(await store.byIds([])).toEqual(new Map());
    await sut.close();
  });

  it('the index survives a restart without a rebuild and gives the same top-k', async () => {
    const first = await openService(env);
    await seed(first, 60);
    const before = await topIds(first, 'which tool compiles typescript');
    await first.close();
    expect(existsSync(env.indexPath)).toBe(true);

    const sut = await openService(env);
    expect(sut.indexRebuiltBecause).toBeNull();
    expect(await topIds(sut, 'which tool compiles typescript')).toEqual(before);
    await sut.close();
  });

  it('an index saved empty reopens without a rebuild, grows past its first capacity and survives another restart', async () => {
    await (await openService(env)).close();
    await (await openService(env)).close();

    const sut = await openService(env);
    expect(sut.indexRebuiltBecause).toBeNull();
    await seed(sut, 1100);
    const before = await topIds(sut, 'which tool compiles typescript');
    await sut.close();

    const again = await openService(env);
    expect(again.indexRebuiltBecause).toBeNull();
    expect(await topIds(again, 'which tool compiles typescript')).toEqual(before);
    await again.close();
  });

  it.each([
    ['deleted', (p: string) => rmSync(p), 'missing'],
    ['corrupted', (p: string) => writeFileSync(p, Buffer.alloc(4096, 7)), 'corrupt (checksum mismatch)'],
    ['meta garbled', (p: string) => writeFileSync(`${p}.meta.json`, '{nope'), 'corrupt meta'],
  ])(
    'an index file that was %s is rebuilt from the table with the same top-k',
    async (_name, damage, reason) => {
      const first = await openService(env);
      await seed(first, 60);
      const queries = ['which tool compiles typescript', 'nearest vectors search', 'where are events stored'];
      const before = await Promise.all(queries.map((q) => topIds(first, q)));
      await first.close();
      damage(env.indexPath);

      const sut = await openService(env);
      expect(sut.indexRebuiltBecause).toBe(reason);
      expect(await Promise.all(queries.map((q) => topIds(sut, q)))).toEqual(before);
      await sut.close();
    },
  );

  describe('rebuilding in a worker thread (rebuildInBackground)', () => {
    const queries = ['which tool compiles typescript', 'nearest vectors search', 'where are events stored'];

    it('scans exactly while a missing index is rebuilt, then loads the rebuilt file with what was written meanwhile', async () => {
      const first = await openService(env);
      await seed(first, 200);
      const before = await Promise.all(queries.map((q) => topIds(first, q)));
      await first.close();
      rmSync(env.indexPath);

      const sut = await openService(env, { rebuildInBackground: true });
      expect(sut.indexStatus).toEqual({ index: 'rebuilding', rebuilt_because: 'missing' });
      expect(await Promise.all(queries.map((q) => topIds(sut, q)))).toEqual(before);
      const written = await sut.insert({
        text: 'written while the index was rebuilt',
        kind: 'fact',
        source: 'user',
        weight: 1,
        reason: 't',
      });
      expect(sut.indexStatus.index).toBe('rebuilding');
      expect(await topIds(sut, 'written while the index was rebuilt', 1)).toEqual([written.id]);
      expect((await sut.remember({ ...written, source: 'user', reason: 'again' })).op).not.toBe('insert');

      await sut.indexReady();
      expect(sut.indexStatus).toEqual({ index: 'ready', rebuilt_because: 'missing' });
      expect(existsSync(env.indexPath)).toBe(true);
      expect(await Promise.all(queries.map((q) => topIds(sut, q)))).toEqual(before);
      expect(await topIds(sut, 'written while the index was rebuilt', 1)).toEqual([written.id]);
      await sut.close();

      const reopened = await openService(env, { rebuildInBackground: true });
      expect(reopened.indexStatus).toEqual({ index: 'ready', rebuilt_because: null });
      expect(await topIds(reopened, 'written while the index was rebuilt', 1)).toEqual([written.id]);
      await reopened.close();
    });

    it('an index outgrowing its flat layout gets its graph from a worker, not the event loop; exact scans meanwhile', async () => {
      const sut = await openService(env, { rebuildInBackground: true });
      const onThisThread = jest.spyOn(VectorIndex.prototype as never, 'buildGraph' as never);
      try {
        await seed(sut, FLAT_UP_TO);
        const before = sut.indexStatus;
        expect(before.index).toBe('ready');
        const outgrowing = (
          await sut.insert({
            text: 'the entry whose add outgrew the flat list',
            kind: 'fact',
            source: 'user',
            weight: 1,
            reason: 't',
          })
        ).id;
        expect(sut.indexStatus).toEqual({
          index: 'rebuilding',
          rebuilt_because: expect.stringContaining('outgrew the flat layout'),
        });
        const exact = await Promise.all(queries.map((q) => topIds(sut, q)));
        const written = await sut.insert({
          text: 'written while the graph was built',
          kind: 'fact',
          source: 'user',
          weight: 1,
          reason: 't',
        });
        expect(await topIds(sut, 'written while the graph was built', 1)).toEqual([written.id]);

        await sut.indexReady();
        // once built, /health says what it said before: the file was not rebuilt for being unusable
        expect(sut.indexStatus).toEqual(before);
        expect(onThisThread).not.toHaveBeenCalled();
        expect(await Promise.all(queries.map((q) => topIds(sut, q)))).toEqual(exact);
        // both in the graph: the entry whose add set the build off, and one written during it
        for (const id of [outgrowing, written.id]) {
          const entry = (await sut.get(id))!;
          expect(await sut.nearest(await sut.embed(entry.text), entry.kind)).toMatchObject({ entry_id: id });
        }
        await sut.close();
        expect(savedLayout(env.indexPath)).toBe('hnsw');
        const reopened = await openService(env, { rebuildInBackground: true });
        expect(reopened.indexStatus).toEqual({ index: 'ready', rebuilt_because: null });
        expect(await topIds(reopened, 'written while the graph was built', 1)).toEqual([written.id]);
        await reopened.close();
      } finally {
        onThisThread.mockRestore();
      }
    });

    it('a rebuild from the log that outgrows the flat layout leaves the graph the worker built, not its flat list', async () => {
      const sut = await openService(env, { rebuildInBackground: true });
      await seed(sut, FLAT_UP_TO + 20);
      await sut.indexReady();
      const onThisThread = jest.spyOn(VectorIndex.prototype as never, 'buildGraph' as never);
      const savedLayouts: string[] = [];
      const save = VectorIndex.prototype.saveIfDirty;
      const saves = jest.spyOn(VectorIndex.prototype, 'saveIfDirty').mockImplementation(function (
        this: VectorIndex,
      ) {
        savedLayouts.push(this.layout);
        return save.call(this);
      });
      try {
        await sut.rebuildFromLog();
        await sut.indexReady();
        expect(onThisThread).not.toHaveBeenCalled();
        // the flat list the rebuild outgrew is not saved over the file the worker writes
        expect(savedLayouts).not.toContain('flat');
        expect(savedLayout(env.indexPath)).toBe('hnsw');
        expect(sut.indexStatus.index).toBe('ready');
      } finally {
        onThisThread.mockRestore();
        saves.mockRestore();
        await sut.close();
      }
    });

    it('a flat file the table outgrew (closed during its conversion) gets its graph from a worker at the next open', async () => {
      const first = await openService(env);
      await seed(first, FLAT_UP_TO);
      await first.close();
      expect(savedLayout(env.indexPath)).toBe('flat');
      // entries the file never saw, as when a close stopped the worker building their graph
      const tableOnly = await openService(env, { indexPath: undefined });
      await seed(tableOnly, 10);
      const unseen = await tableOnly.insert({
        text: 'an entry only the table holds',
        kind: 'fact',
        source: 'user',
        weight: 1,
        reason: 't',
      });
      await tableOnly.close();

      const onThisThread = jest.spyOn(VectorIndex.prototype as never, 'buildGraph' as never);
      try {
        const sut = await openService(env, { rebuildInBackground: true });
        expect(sut.indexStatus).toEqual({
          index: 'rebuilding',
          rebuilt_because: expect.stringContaining('outgrew the flat layout'),
        });
        const exact = await Promise.all(queries.map((q) => topIds(sut, q)));
        await sut.indexReady();
        expect(sut.indexStatus).toEqual({ index: 'ready', rebuilt_because: null });
        expect(onThisThread).not.toHaveBeenCalled();
        expect(await Promise.all(queries.map((q) => topIds(sut, q)))).toEqual(exact);
        expect(await sut.nearest(await sut.embed(unseen.text), unseen.kind)).toMatchObject({
          entry_id: unseen.id,
        });
        await sut.close();
        expect(savedLayout(env.indexPath)).toBe('hnsw');
      } finally {
        onThisThread.mockRestore();
      }
    });

    it('a rebuild that finishes while the service closes is not loaded after close; its file serves the next open', async () => {
      await seedWithoutIndexFile(env, 50);

      const sut = await openService(env, { rebuildInBackground: true });
      const internals = sut as unknown as {
        projection: { positionSaved: Promise<void> };
        index: { rebuild: { job: { done: Promise<unknown> } } | null };
      };
      const built = internals.index.rebuild!.job.done;
      const loads = jest.spyOn(VectorIndex, 'open');
      try {
        // the close waits for the last pass's position write while the worker finishes
        let savePosition!: () => void;
        internals.projection.positionSaved = new Promise<void>((r) => (savePosition = r));
        const closing = sut.close();
        await built;
        await new Promise((r) => setTimeout(r, 20));
        savePosition();
        await closing;
        expect(loads).not.toHaveBeenCalled();
      } finally {
        loads.mockRestore();
      }
      const reopened = await openService(env, { rebuildInBackground: true });
      expect(reopened.indexStatus).toEqual({ index: 'ready', rebuilt_because: null });
      await reopened.close();
    });

    it('closing during the rebuild stops the worker and leaves no file; the next open rebuilds again', async () => {
      await seedWithoutIndexFile(env, 50);

      const sut = await openService(env, { rebuildInBackground: true });
      await sut.close();
      expect(existsSync(env.indexPath)).toBe(false);

      const again = await openService(env, { rebuildInBackground: true });
      expect(again.indexStatus.index).toBe('rebuilding');
      await again.indexReady();
      expect(again.indexStatus.index).toBe('ready');
      await again.close();
    });
  });

  it('an index file ahead of its table (a database restored from an older backup) is rebuilt', async () => {
    const first = await openService(env);
    const ids = await seed(first, 12);
    await first.close();
    await env.handle.db
      .deleteFrom('memory_entries' as never)
      .where('id' as never, '=', ids[11] as never)
      .execute();

    const sut = await openService(env);
    expect(sut.indexRebuiltBecause).toBe('index is ahead of the table');
    const fresh = await sut.insert({
      text: 'a new entry after the restore',
      kind: 'fact',
      source: 'user',
      weight: 0.9,
      reason: 't',
    });
    expect((await sut.search('a new entry after the restore', { k: 1 }))[0].entry.id).toBe(fresh.id);
    await sut.close();
  });

  it('an index built by another embedder is rebuilt and every entry re-embedded', async () => {
    const first = await openService(env);
    await seed(first, 20);
    await first.close();

    const sut = await openService(env, {}, new HashingEmbedder(128));
    expect(sut.indexRebuiltBecause).toBe('built by runledger-hash-v1/384, now runledger-hash-v1/128');
    const hits = await sut.search('sqlite stores the event log', { k: 3 });
    expect(hits[0].entry.text).toMatch(/^sqlite stores the event log/);
    expect(hits.every((h) => h.entry.embedding_dim === 128)).toBe(true);
    await sut.close();
  });

  it('deletes are tombstones: gone from search, labels not reused, still gone after restart', async () => {
    const first = await openService(env);
    const [a] = await seed(first, 10);
    const deleted = await first.delete(a, 'test');
    expect(deleted.deleted).toBe(true);
    await expect(first.delete(a, 'again')).rejects.toThrow(/not found/);
    const after = await first.insert({
      text: 'a fresh entry',
      kind: 'fact',
      source: 'user',
      weight: 0.5,
      reason: 't',
    });
    expect((await first.get(after.id))!.label).toBe(10);
    expect(await topIds(first, TOPICS[0], 10)).not.toContain(a);
    await first.close();

    const sut = await openService(env);
    expect(await topIds(sut, TOPICS[0], 10)).not.toContain(a);
    const log = await env.events.readStream(MEMORY_SYSTEM_STREAM);
    expect(
      log.filter((e) => e.type === 'MEMORY_WRITTEN').map((e) => (e.payload as { op: string }).op),
    ).toEqual([...Array(10).fill('insert'), 'delete', 'insert']);
    await sut.close();
  });

  it('a delete made after the last index save is honoured on reopen', async () => {
    const first = await openService(env);
    const ids = await seed(first, 10);
    first.flush();
    // a second process deletes; this one never saves its index again
    const other = await openService(env, { indexPath: null });
    await other.delete(ids[1], 'elsewhere');
    const sut = await openService(env);
    expect(sut.indexRebuiltBecause).toBeNull();
    expect(await topIds(sut, TOPICS[1], 10)).not.toContain(ids[1]);
    await Promise.all([first.close(), other.close(), sut.close()]);
  });

  it('rebuildFromLog recreates the same entries, weights and top-k from MEMORY_WRITTEN events', async () => {
    const sut = await openService(env);
    const ids = await seed(sut, 30);
    await sut.delete(ids[4], 'test');
    const before = await sut.list({}, 100);
    const top = await topIds(sut, 'jest runs the unit tests');

    const applied = await sut.rebuildFromLog();
    expect(applied).toBe(31);
    const after = await sut.list({}, 100);
    const essentials = (entries: typeof before) =>
      entries.map(({ id, text, weight, kind, label, session_id }) => ({
        id,
        text,
        weight,
        kind,
        label,
        session_id,
      }));
    expect(essentials(after)).toEqual(essentials(before));
    expect(await topIds(sut, 'jest runs the unit tests')).toEqual(top);
    await sut.close();
  });

  it('small filtered sets are scanned exactly and agree with the index path', async () => {
    const viaIndex = await openService(env);
    await seed(viaIndex, 40);
    const q = { k: 4, session_id: 's-odd', kind: 'tool_result' as const };
    const a = (await viaIndex.search('kysely builds sql', q)).map((h) => h.entry.id);
    const exact = await openService(env, { exactScanBelow: 10_000, indexPath: null });
    const b = (await exact.search('kysely builds sql', q)).map((h) => h.entry.id);
    expect(a).toEqual(b);
    expect(a.length).toBe(4);
    await Promise.all([viaIndex.close(), exact.close()]);
  });

  it('a set of sessions (null: written for nobody) filters every search path alike, still k hits', async () => {
    const viaIndex = await openService(env);
    await seed(viaIndex, 40);
    const nobody = await viaIndex.insert({
      text: 'kysely builds sql queries for nobody',
      kind: 'fact',
      source: 'system',
      weight: 0.5,
      reason: 'seed',
    });
    const q = { k: 5, sessions: ['s-odd', null] };
    const a = await viaIndex.search('kysely builds sql', q);
    const live = await openService(env, { exactScanBelow: 10_000, indexPath: null });
    const table = await openService(env, { exactScanBelow: 10_000, indexPath: null, keepLiveEntries: false });
    const b = await live.search('kysely builds sql', q);
    const c = await table.search('kysely builds sql', q);
    const heard = await live.search('kysely builds sql', { ...q, freshness: 'heard' });
    const ids = (hits: { entry: { id: string } }[]) => hits.map((h) => h.entry.id);
    expect(ids(a)).toHaveLength(5);
    expect(ids(a)).toContain(nobody.id);
    for (const h of a) expect([null, 's-odd']).toContain(h.entry.session_id);
    for (const other of [b, c, heard]) expect(ids(other)).toEqual(ids(a));
    // without the filter the nearest entries of the other session rank among them
    const unfiltered = await viaIndex.search('kysely builds sql', { k: 5 });
    expect(unfiltered.map((h) => h.entry.session_id)).toContain('s-even');
    expect((await live.list({ sessions: ['s-even'] }, 100)).map((e) => e.session_id)).toEqual(
      Array(20).fill('s-even'),
    );
    await Promise.all([viaIndex.close(), live.close(), table.close()]);
  });

  it('nearest() over a set of sessions finds only their entries on every path: index, live entries, table, heard, handed over', async () => {
    const first = await openService(env);
    await seed(first, 40);
    await first.close();
    // the nearest entry of all is s-even's; the query is its text
    const query = 'sqlite stores the event log (note 2)';
    const kind = 'tool_result';
    const configs: Partial<MemoryServiceOptions>[] = [
      {},
      { keepLiveEntries: false },
      { exactScanBelow: 10_000, indexPath: null },
      { exactScanBelow: 10_000, indexPath: null, keepLiveEntries: false },
    ];
    const found: unknown[] = [];
    for (const over of configs) {
      const sut = await openService(env, over);
      const vector = await sut.embed(query);
      const all = await sut.nearest(vector, kind);
      const odd = await sut.nearest(vector, kind, [], ['s-odd', null]);
      expect([over, (await sut.get(all!.entry_id))?.session_id]).toEqual([over, 's-even']);
      expect([over, (await sut.get(odd!.entry_id))?.session_id]).toEqual([over, 's-odd']);
      expect(await sut.nearest(vector, kind, [], [null])).toBeNull();
      found.push(odd);
      await sut.close();
    }
    for (const other of found) expect(other).toEqual(found[0]);

    // written and not applied yet: heard committed, and handed over by another task's writer
    const store = new MemoryStore(env.handle.db as unknown as import('kysely').Kysely<MemoryDatabase>);
    const sut = await openService(env, { store });
    const release = holdWrites(store, ['insertIfAbsent']);
    const heardText = 'the heard session keeps its notes apart';
    const heard = sut.insertPayload(
      { text: heardText, kind: 'fact', source: 'user', weight: 0.5, reason: 'r', session_id: 'ses_heard' },
      null,
    );
    await env.events.append(
      MEMORY_SYSTEM_STREAM,
      [{ type: 'MEMORY_WRITTEN', session_id: 'ses_heard', payload: heard }],
      { expected: 'any' },
    );
    const handedText = 'the handed session keeps its notes apart';
    const handedPayload = sut.insertPayload(
      { text: handedText, kind: 'fact', source: 'user', weight: 0.5, reason: 'r' },
      null,
    );
    const handed = {
      event_id: 'evt_handed_ses',
      task_id: 'task_handed',
      session_id: 'ses_handed',
      sequence: 3,
      position: 0,
      type: 'MEMORY_WRITTEN',
      payload: handedPayload,
      causation_id: null,
      correlation_id: 'task_handed',
      created_at: new Date().toISOString(),
    } as RuntimeEvent;
    const unlist = env.events.handOver([handed]);
    for (const [text, owner, committed] of [
      [heardText, 'ses_heard', true],
      [handedText, 'ses_handed', false],
    ] as const) {
      const vector = await sut.embed(text);
      expect(await sut.nearest(vector, 'fact', [], [owner, null])).toMatchObject({
        entry_id: (owner === 'ses_heard' ? heard : handedPayload).entry_id,
        committed,
      });
      const elsewhere = await sut.nearest(vector, 'fact', [], ['ses_other', null]);
      expect(
        elsewhere === null || ![heard.entry_id, handedPayload.entry_id].includes(elsewhere.entry_id),
      ).toBe(true);
    }
    expect(await store.get(heard.entry_id)).toBeNull();
    unlist();
    release();
    await sut.close();
  });

  it('nearest() finds a write it heard without waiting for it to be applied to the table', async () => {
    const store = new MemoryStore(env.handle.db as unknown as import('kysely').Kysely<MemoryDatabase>);
    const sut = await openService(env, { store });
    const release = holdWrites(store, ['insertIfAbsent']);
    const payload = sut.insertPayload(
      { text: 'hnsw finds nearest vectors', kind: 'fact', source: 'user', weight: 0.5, reason: 'r' },
      null,
    );
    await env.events.append(
      MEMORY_SYSTEM_STREAM,
      [{ type: 'MEMORY_WRITTEN', session_id: 'system', payload }],
      { expected: 'any' },
    );
    const found = await sut.nearest(await sut.embed('hnsw finds nearest vectors'), 'fact');
    expect(found).toMatchObject({ entry_id: payload.entry_id, weight: 0.5 });
    expect(await store.get(payload.entry_id)).toBeNull();
    release();
    // applied in the background meanwhile: the table has it once the pass ends
    await sut.sync('heard');
    expect(await store.get(payload.entry_id)).toMatchObject({ id: payload.entry_id });
    await sut.close();
  });

  it("nearest() finds another writer's write handed to the store and not committed yet; released uncommitted, it is gone", async () => {
    const sut = await openService(env);
    const text = 'the writer thread commits each group';
    const payload = sut.insertPayload({ text, kind: 'fact', source: 'user', weight: 0.5, reason: 'r' }, null);
    // as a TaskWriter folded it: its position comes with the commit
    const handed = {
      event_id: 'evt_handed',
      task_id: 'task_other',
      session_id: 'ses_other',
      sequence: 7,
      position: 0,
      type: 'MEMORY_WRITTEN',
      payload,
      causation_id: null,
      correlation_id: 'task_other',
      created_at: new Date().toISOString(),
    } as RuntimeEvent;
    const vector = await sut.embed(text);
    expect(await sut.nearest(vector, 'fact')).toBeNull();
    const release = env.events.handOver([handed]);
    expect(await sut.nearest(vector, 'fact')).toMatchObject({ entry_id: payload.entry_id, weight: 0.5 });
    // of another kind, it is not a match
    expect(await sut.nearest(vector, 'summary')).toBeNull();
    release();
    expect(await sut.nearest(vector, 'fact')).toBeNull();
    expect(await sut.list({}, 10)).toEqual([]);
    await sut.close();
  });

  it('a `heard` search overlays up to 128 heard inserts the pass has not applied; with more it waits for the pass', async () => {
    const store = new MemoryStore(env.handle.db as unknown as import('kysely').Kysely<MemoryDatabase>);
    const embedder = new HashingEmbedder();
    const sut = await openService(env, { store, exactScanBelow: 2000 }, embedder);
    const release = holdWrites(store, ['insertIfAbsent']);
    const text = (i: number) => `note ${i} on the event log`;
    const note = (i: number): NewEvent => ({
      type: 'MEMORY_WRITTEN',
      payload: sut.insertPayload(
        { text: text(i), kind: 'fact', source: 'user', weight: 0.5, reason: 'r' },
        null,
      ),
    });
    try {
      await env.events.append(
        'task_many',
        [taskReceivedEvent('sess_many'), ...Array.from({ length: 128 }, (_, i) => note(i))],
        { expected: 'no_stream' },
      );
      const search = (query: string) => sut.search(query, { k: 1, freshness: 'heard' });
      expect((await search('note 7 on the event log'))[0].entry.text).toBe(text(7));
      // the overlaid entries are built once: a second search embeds its query and no note again
      const embedded = jest.spyOn(embedder, 'embed');
      expect((await search('which note is 99'))[0].entry).toMatchObject({
        text: text(99),
        task_id: 'task_many',
        weight: 0.5,
      });
      expect(embedded.mock.calls).toEqual([[['which note is 99']]]);
      const [again] = await search('which note is 99');
      expect(again.entry.metadata).toBe((await search('which note is 99'))[0].entry.metadata);
      await env.events.append('task_many', [note(128)], { expected: 129 });
      const waiting = search('note 128 on the event log');
      const early = await Promise.race([
        waiting.then(() => 'answered'),
        new Promise((r) => setTimeout(() => r('waiting'), 200)),
      ]);
      expect(early).toBe('waiting');
      release();
      expect((await waiting)[0].entry.text).toBe(text(128));
      expect(await store.countActive()).toBe(129);
    } finally {
      release();
      await sut.close();
    }
  });

  it('a `heard` search over the live entries sees the heard writes before they are applied: inserts, weights, deletions', async () => {
    const store = new MemoryStore(env.handle.db as unknown as import('kysely').Kysely<MemoryDatabase>);
    const sut = await openService(env, { store, exactScanBelow: 2000 });
    const applied = await sut.insert({
      text: 'sqlite stores the event log',
      kind: 'fact',
      source: 'user',
      weight: 0.5,
      reason: 'r',
    });
    const release = holdWrites(store, ['insertIfAbsent', 'setWeight', 'tombstone']);
    const written = (payload: ReturnType<MemoryService['insertPayload']>): NewEvent => ({
      type: 'MEMORY_WRITTEN',
      payload,
    });
    const added = sut.insertPayload(
      { text: 'kysely builds sql queries', kind: 'fact', source: 'user', weight: 0.4, reason: 'r' },
      null,
    );
    await env.events.append('task_heard', [taskReceivedEvent('sess_heard'), written(added)], {
      expected: 'no_stream',
    });
    await env.events.append(
      'task_heard',
      [written({ ...added, op: 'reinforce', previous_weight: 0.4, weight: 0.9 })],
      { expected: 2 },
    );
    const search = (query: string, session_id?: string) =>
      sut.search(query, { k: 3, freshness: 'heard', session_id });
    const [hit] = await search('kysely builds sql queries', 'sess_heard');
    expect(hit.entry).toMatchObject({ id: added.entry_id, weight: 0.9, task_id: 'task_heard' });
    expect(hit.score).toBeCloseTo(hit.similarity * 0.9);
    expect(await search('kysely builds sql queries', 'another session')).toEqual([]);
    expect((await search('sqlite stores the event log'))[0].entry.id).toBe(applied.id);
    await env.events.append(
      'task_heard',
      [
        written({
          ...sut.insertPayload({ text: 'x', kind: 'fact', source: 'user', weight: 0, reason: 'gone' }, null),
          op: 'delete',
          entry_id: applied.id,
        }),
      ],
      { expected: 3 },
    );
    expect((await search('sqlite stores the event log')).map((h) => h.entry.id)).not.toContain(applied.id);
    // none of it is in the table yet; a `committed` search waits for it all
    expect(await store.get(added.entry_id)).toBeNull();
    release();
    const committed = await sut.search('kysely builds sql queries', { k: 3 });
    expect(committed[0].entry).toMatchObject({ id: added.entry_id, weight: 0.9 });
    expect(committed.map((h) => h.entry.id)).not.toContain(applied.id);
    await sut.close();
  });

  it('remember() right after a write it heard reinforces the entry, applied first', async () => {
    const sut = await openService(env);
    const text = 'bubblewrap sandboxes tools';
    const payload = sut.insertPayload({ text, kind: 'fact', source: 'user', weight: 0.5, reason: 'r' }, null);
    await env.events.append(
      MEMORY_SYSTEM_STREAM,
      [{ type: 'MEMORY_WRITTEN', session_id: 'system', payload }],
      { expected: 'any' },
    );
    const again = await sut.remember({ text, kind: 'fact', source: 'user', weight: 0.5, reason: 'again' });
    expect(again.op).toBe('reinforce');
    expect(again.entry).toMatchObject({ id: payload.entry_id });
    expect(again.entry.weight).toBeGreaterThan(0.5);
    await sut.close();
  });

  it('a write heard while rebuildFromLog clears the table is applied after it, with everything else', async () => {
    const store = new MemoryStore(env.handle.db as unknown as import('kysely').Kysely<MemoryDatabase>);
    const sut = await openService(env, { store });
    await seed(sut, 5);
    const clear = store.clear.bind(store);
    let late: string | null = null;
    // the heard write's own pass is slow: it would end after the rebuild began to apply the log again
    const insert = store.insertIfAbsent.bind(store);
    jest.spyOn(store, 'insertIfAbsent').mockImplementation(async (row) => {
      if (row.id === late) await new Promise((resolve) => setTimeout(resolve, 100));
      return insert(row);
    });
    jest.spyOn(store, 'clear').mockImplementation(async () => {
      await clear();
      const payload = sut.insertPayload(
        { text: 'written during the rebuild', kind: 'fact', source: 'user', weight: 0.5, reason: 'r' },
        null,
      );
      late = payload.entry_id;
      await env.events.append(
        MEMORY_SYSTEM_STREAM,
        [{ type: 'MEMORY_WRITTEN', session_id: 'system', payload }],
        { expected: 'any' },
      );
    });
    expect(await sut.rebuildFromLog()).toBe(6);
    expect((await sut.list({}, 100)).map((e) => e.id)).toContain(late);
    expect(await sut.list({}, 100)).toHaveLength(6);
    await sut.close();
  });

  it("a `heard` read sees another process's write once it is heard; a `committed` read at once", async () => {
    // this process's store hears its own commits and, with polling off, another's only with its next commit
    const events = new SqliteEventStore(env.handle, { foreignCommitPollMs: 0 });
    const sut = await MemoryService.open({
      store: new MemoryStore(env.handle.db as unknown as import('kysely').Kysely<MemoryDatabase>),
      events,
      embedder: new HashingEmbedder(),
      indexPath: null,
    });
    await sut.insert({
      text: 'nestjs serves the http api',
      kind: 'fact',
      source: 'user',
      weight: 0.5,
      reason: 'r',
    });
    const other = openSqlite({ path: env.dbPath, synchronous: 'NORMAL' });
    const payload = sut.insertPayload(
      { text: 'kysely builds sql queries', kind: 'fact', source: 'user', weight: 0.5, reason: 'r' },
      null,
    );
    await new SqliteEventStore(other).append(
      MEMORY_SYSTEM_STREAM,
      [{ type: 'MEMORY_WRITTEN', session_id: 'system', payload }],
      { expected: 'any' },
    );
    const vector = await sut.embed('kysely builds sql queries');
    expect((await sut.nearest(vector, 'fact'))?.entry_id).not.toBe(payload.entry_id);
    expect(
      (await sut.search('kysely builds sql queries', { k: 1, freshness: 'heard' }))[0].entry.id,
    ).not.toBe(payload.entry_id);
    expect((await sut.search('kysely builds sql queries', { k: 1 }))[0].entry.id).toBe(payload.entry_id);
    expect((await sut.nearest(vector, 'fact'))?.entry_id).toBe(payload.entry_id);
    // heard with this process's next commit, which publishes what another connection committed before it
    const later = sut.insertPayload(
      { text: 'zod validates the payloads', kind: 'fact', source: 'user', weight: 0.5, reason: 'r' },
      null,
    );
    await new SqliteEventStore(other).append(
      MEMORY_SYSTEM_STREAM,
      [{ type: 'MEMORY_WRITTEN', session_id: 'system', payload: later }],
      { expected: 'any' },
    );
    await events.append(
      'task_heard',
      [{ type: 'TASK_RECEIVED', payload: { input: 'x', session_id: 's' } as never }],
      {
        expected: 'no_stream',
      },
    );
    const heard = await sut.search('zod validates the payloads', { k: 1, freshness: 'heard' });
    expect(heard[0].entry.id).toBe(later.entry_id);
    other.close();
    await sut.close();
  });

  describe('the critic/memory outcome hook', () => {
    const manifest = { name: 'file_read', sensitive_output: false, secrets: [] as string[] };
    async function toolOutcome(
      taskId: string,
      output: unknown,
      session = `sess-${taskId}`,
    ): Promise<ToolOutcomeEvent> {
      await env.events.append(
        taskId,
        [
          {
            type: 'TASK_RECEIVED',
            session_id: session,
            payload: { input: 'read it', session_id: session } as never,
          },
        ],
        { expected: 'no_stream' },
      );
      const { events } = await env.events.append(
        taskId,
        [
          {
            type: 'TOOL_COMPLETED',
            payload: {
              call_id: `call-${taskId}`,
              tool: 'file_read',
              result: { tool: 'file_read', ok: true, output, error: null, metadata: {} },
              duration_ms: 1,
            },
          },
        ],
        { expected: 'any' },
      );
      return events[0] as ToolOutcomeEvent;
    }

    it('writes with provenance into the task stream; the projection and rebuildFromLog agree', async () => {
      const memory = await openService(env);
      const sut = createCriticMemoryHook({ critic: new HeuristicCritic(), memory });
      const outcome = await toolOutcome('task_a', { content: 'the cache lives in /var/cache/runledger' });
      const events = await sut({
        task_id: 'task_a',
        session_id: 'sess-task_a',
        event: outcome,
        manifest,
        events: [],
      });
      expect(events.map((e) => e.type)).toEqual(['CRITIC_RESULT', 'MEMORY_WRITTEN']);
      await env.events.append('task_a', events, { expected: 'any' });

      const [hit] = await memory.search('where is the cache', { k: 1 });
      expect(hit.entry).toMatchObject({
        task_id: 'task_a',
        session_id: 'sess-task_a',
        kind: 'tool_result',
        text: 'file_read: the cache lives in /var/cache/runledger',
      });
      expect(hit.entry.metadata).toMatchObject({ call_id: 'call-task_a', critic: 'heuristic' });

      // the same outcome in a second task reinforces instead of copying
      const again = await sut({
        task_id: 'task_b',
        session_id: 'sess-task_b',
        event: await toolOutcome('task_b', { content: 'the cache lives in /var/cache/runledger' }),
        manifest,
        events: [],
      });
      expect(again[1].payload).toMatchObject({
        op: 'reinforce',
        entry_id: hit.entry.id,
        previous_weight: hit.entry.weight,
      });
      await env.events.append('task_b', again, { expected: 'any' });
      const reinforced = (await memory.get(hit.entry.id))!;
      expect(reinforced.weight).toBeGreaterThan(hit.entry.weight);

      await memory.rebuildFromLog();
      expect(await memory.get(hit.entry.id)).toMatchObject({
        weight: reinforced.weight,
        task_id: 'task_a',
        label: reinforced.label,
      });
      await memory.close();
    });

    it("deduplicating within the session: a write reinforces only its own session's entries, and no write copies an entry's text", async () => {
      const memory = await openService(env, { deduplicateWithinSession: true });
      const sut = createCriticMemoryHook({ critic: new HeuristicCritic(), memory });
      const output = { content: 'the vault phrase of the harbour archive is kept in the blue ledger' };
      const hook = async (task: string, session: string, events: RuntimeEvent[] = []) =>
        (
          await sut({
            task_id: task,
            session_id: session,
            event: await toolOutcome(task, output, session),
            manifest,
            events,
          })
        )[1];
      // decided side by side, not committed: a write of another session is not reinforced, one of its own is,
      // with the writer's own text (that write may never commit)
      const [a1, b1] = await Promise.all([hook('task_a1', 'ses_a'), hook('task_b1', 'ses_b')]);
      const a2 = await hook('task_a2', 'ses_a');
      expect([a1.payload, b1.payload, a2.payload]).toMatchObject([
        { op: 'insert' },
        { op: 'insert' },
        { op: 'reinforce', entry_id: (a1.payload as { entry_id: string }).entry_id },
      ]);
      expect((a2.payload as { text?: string }).text).toBe(`file_read: ${output.content}`);
      await memory.close();
      const ledger = await openService(env, { deduplicateWithinSession: true });
      const hookOf = createCriticMemoryHook({ critic: new HeuristicCritic(), memory: ledger });
      // committed and applied: a reinforce names the entry and carries no text
      await env.events.append('task_a1', [a1], { expected: 'any' });
      await env.events.append('task_b1', [b1], { expected: 'any' });
      await ledger.sync();
      const a3 = (
        await hookOf({
          task_id: 'task_a3',
          session_id: 'ses_a',
          event: await toolOutcome('task_a3', output, 'ses_a'),
          manifest,
          events: [],
        })
      )[1];
      expect(a3.payload).toMatchObject({
        op: 'reinforce',
        entry_id: (a1.payload as { entry_id: string }).entry_id,
      });
      expect(a3.payload).not.toHaveProperty('text');

      // the memory tools' remember(): its own session's entry is reinforced on the system stream under that
      // session, with no text; another session's near-duplicate is a new entry of its own
      const fact = {
        kind: 'fact' as const,
        source: 'tool' as const,
        weight: 0.5,
        reason: 'memory_insert tool',
      };
      const text = 'the ledger of the harbour archive is blue and kept in room four';
      const mine = await ledger.remember({ ...fact, text, session_id: 'ses_a', task_id: 'task_a1' });
      const again = await ledger.remember({
        ...fact,
        text: `${text}.`,
        session_id: 'ses_a',
        task_id: 'task_a1',
      });
      const theirs = await ledger.remember({
        ...fact,
        text: `${text}!`,
        session_id: 'ses_b',
        task_id: 'task_b1',
      });
      const nobody = await ledger.remember({ ...fact, text: `${text}?` });
      expect([mine.op, again.op, again.entry.id, theirs.op, nobody.op]).toEqual([
        'insert',
        'reinforce',
        mine.entry.id,
        'insert',
        'insert',
      ]);
      await ledger.delete(mine.entry.id, 'admin', 'root');
      const system = (await env.events.readStream(MEMORY_SYSTEM_STREAM)).filter(
        (e) => e.type === 'MEMORY_WRITTEN',
      );
      const [reinforce, deletion] = system.filter((e) => e.payload.entry_id === mine.entry.id).slice(1);
      expect([reinforce.session_id, reinforce.payload.op, deletion.session_id, deletion.payload.op]).toEqual([
        'ses_a',
        'reinforce',
        'system',
        'delete',
      ]);
      for (const e of [reinforce, deletion]) expect(e.payload).not.toHaveProperty('text');
      await ledger.close();
    });

    it("tasks deciding side by side find each other's decided writes: one insert and reinforces of it, not copies", async () => {
      const memory = await openService(env);
      const sut = createCriticMemoryHook({ critic: new HeuristicCritic(), memory });
      const output = { content: 'the shared build cache lives in /srv/cache' };
      const timers = jest.spyOn(global, 'setTimeout');
      const written = await Promise.all(
        ['task_x', 'task_y', 'task_z'].map(async (task) =>
          sut({
            task_id: task,
            session_id: `sess-${task}`,
            event: await toolOutcome(task, output),
            manifest,
            events: [],
          }),
        ),
      );
      const writes = written.map(
        (events) => events[1].payload as { op: string; entry_id: string; weight: number },
      );
      expect(writes.map((w) => w.op).sort()).toEqual(['insert', 'reinforce', 'reinforce']);
      expect(new Set(writes.map((w) => w.entry_id)).size).toBe(1);
      expect(new Set(writes.map((w) => w.weight)).size).toBe(3);
      // each decided write is listed for the writers to take over; one that no writer takes leaves in time
      expect(
        env.events
          .handedOver()
          .events.map((e) => e.event_id)
          .sort(),
      ).toEqual(written.map((events) => events[1].event_id).sort());
      const leaveInTime = timers.mock.calls.filter(([, ms]) => ms === 30_000).map(([leave]) => leave);
      timers.mockRestore();
      expect(leaveInTime).toHaveLength(3);
      leaveInTime[0]();
      expect(env.events.handedOver().events).toHaveLength(2);
      // and a service that closes lets the rest go
      await memory.close();
      expect(env.events.handedOver().events).toEqual([]);
    });

    it("a task's write sees its own earlier ones that are not applied: an insert not committed, a weight, a deletion", async () => {
      const memory = await openService(env);
      const sut = createCriticMemoryHook({ critic: new HeuristicCritic(), memory });
      const output = { content: 'the build cache lives in /var/cache/runledger' };
      const first = await sut({
        task_id: 'task_d',
        session_id: 'sess-task_d',
        event: await toolOutcome('task_d1', output),
        manifest,
        events: [],
      });
      const inserted = first[1].payload as { op: string; entry_id: string; weight: number };
      expect(inserted.op).toBe('insert');
      // as the task's writer folds it: handed over, not committed (no position yet); it lists a staged
      // memory write in the store under its id, which takes it over from the hook's decision (decideWrite)
      const releases: Array<() => void> = [];
      const folded = (e: NewEvent, sequence: number): RuntimeEvent =>
        ({
          event_id: e.event_id ?? `evt_folded_${sequence}`,
          task_id: 'task_d',
          session_id: 'sess-task_d',
          sequence,
          position: 0,
          causation_id: null,
          correlation_id: 'task_d',
          created_at: new Date().toISOString(),
          type: e.type,
          payload: e.payload,
        }) as RuntimeEvent;
      const staged = (e: NewEvent, sequence: number): RuntimeEvent => {
        const event = folded(e, sequence);
        releases.push(env.events.handOver([event]));
        return event;
      };
      const log = [staged(first[1], 10)];
      const second = await sut({
        task_id: 'task_d',
        session_id: 'sess-task_d',
        event: await toolOutcome('task_d2', output),
        manifest,
        events: log,
      });
      expect(second[1].payload).toMatchObject({
        op: 'reinforce',
        entry_id: inserted.entry_id,
        previous_weight: inserted.weight,
      });
      const reinforced = second[1].payload as { weight: number };
      // a third write starts from the reinforced weight, not the inserted one
      const third = await sut({
        task_id: 'task_d',
        session_id: 'sess-task_d',
        event: await toolOutcome('task_d3', output),
        manifest,
        events: [...log, staged(second[1], 11)],
      });
      expect(third[1].payload).toMatchObject({ op: 'reinforce', previous_weight: reinforced.weight });
      staged(third[1], 12);
      // deleted by the task before it was applied: nothing to reinforce, a new insert
      const deletion: NewEvent = {
        type: 'MEMORY_WRITTEN',
        payload: { ...(first[1].payload as object), op: 'delete' } as never,
      };
      const fourth = await sut({
        task_id: 'task_d',
        session_id: 'sess-task_d',
        event: await toolOutcome('task_d4', output),
        manifest,
        events: [...log, folded(deletion, 11)],
      });
      expect(fourth[1].payload).toMatchObject({ op: 'insert' });
      staged(fourth[1], 13);
      // committed and applied: found in the index; an event memory has read is not taken again, and
      // the writes the writer dropped uncommitted are gone with their listing
      for (const release of releases) release();
      const stored = await env.events.append('task_d1', first, { expected: 'any' });
      await memory.sync();
      const applied = await memory.nearest(
        await memory.embed(`file_read: ${output.content}`),
        'tool_result',
        [{ ...folded(deletion, 11), position: stored.events[1].position }],
      );
      expect(applied).toMatchObject({ entry_id: inserted.entry_id, weight: inserted.weight });
      await memory.close();
    });

    it('a failing critic yields CRITIC_RESULT with the error and no write', async () => {
      const memory = await openService(env);
      const critic = new ModelCritic({
        model: 'm',
        backend: 'test',
        complete: async () => ({ content: '{"correctness": "high"}' }),
      });
      const sut = createCriticMemoryHook({ critic, memory });
      const events = await sut({
        task_id: 'task_c',
        session_id: 'sess-task_c',
        event: await toolOutcome('task_c', 'useful text'),
        manifest,
        events: [],
      });
      expect(events.map((e) => e.type)).toEqual(['MODEL_CALLED', 'MODEL_RESPONDED', 'CRITIC_RESULT']);
      expect(events[2].payload).toMatchObject({
        score: null,
        error: expect.stringMatching(/not a CriticScore/),
      });
      await env.events.append('task_c', events, { expected: 'any' });
      expect(await memory.list({}, 10)).toEqual([]);
      await memory.close();
    });
  });
});
