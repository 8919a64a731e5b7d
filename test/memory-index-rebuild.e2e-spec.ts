import { existsSync } from 'node:fs';
import { newId } from '@runledger/contracts';
import { openSqlite } from '@runledger/event-store';
import { HashingEmbedder, MemoryDatabase, MemoryStore, cosine, vectorToBuffer } from '@runledger/memory';
import { migrateToLatest } from '@runledger/migrations';
import type { Kysely } from 'kysely';
import { ApiHarness, bootApi } from './api-harness';

const ENTRIES = 4000;
const QUERIES = [
  'which tool compiles typescript',
  'where is the event log stored',
  'sandbox for shell tools',
];
const TOPICS = [
  'swc compiles typescript',
  'sqlite stores the event log',
  'bubblewrap sandboxes tools',
  'zod parses',
];

interface Seeded {
  /** the exact top 5 of each query (similarity x weight over every vector), computed before boot */
  exactTop: string[][];
}

/**
 * ENTRIES rows in the memory table, written in one transaction (applying as many MEMORY_WRITTEN
 * events one by one would take most of the test), and no index file beside the database.
 */
async function seedWithoutIndex(dbPath: string): Promise<Seeded> {
  const handle = openSqlite({ path: dbPath, synchronous: 'OFF' });
  await migrateToLatest(handle.db);
  const embedder = new HashingEmbedder();
  const entries = Array.from({ length: ENTRIES }, (_, i) => ({
    id: newId('mem'),
    text: `${TOPICS[i % TOPICS.length]} (note ${i}, ${(i * 7919) % 1000})`,
    weight: 0.5 + (i % 5) / 10,
  }));
  const vectors = await embedder.embed(entries.map((e) => e.text));
  const at = new Date().toISOString();
  await handle.db.transaction().execute(async (trx) => {
    const store = new MemoryStore(trx as unknown as Kysely<MemoryDatabase>);
    for (const [i, e] of entries.entries())
      await store.insertIfAbsent({
        ...e,
        kind: 'fact',
        source: 'system',
        task_id: null,
        session_id: null,
        metadata: '{}',
        embedding_model: embedder.model,
        embedding_dim: embedder.dim,
        vector: vectorToBuffer(vectors[i]),
        deleted: 0,
        written_by: 'evt_seed',
        created_at: at,
        updated_at: at,
      });
  });
  await handle.close();
  const exactTop = await Promise.all(
    QUERIES.map(async (query) => {
      const [q] = await embedder.embed([query]);
      return entries
        .map((e, i) => ({ id: e.id, i, score: cosine(q, vectors[i]) * e.weight }))
        .sort((a, b) => b.score - a.score || a.i - b.i)
        .slice(0, 5)
        .map((e) => e.id);
    }),
  );
  return { exactTop };
}

describe('memory index rebuilt at boot in a worker thread', () => {
  let h: ApiHarness;
  let seeded: Seeded;

  beforeAll(async () => {
    h = await bootApi(
      {},
      {
        beforeBoot: async (dbPath) => {
          seeded = await seedWithoutIndex(dbPath);
        },
        checkResponses: true,
      },
    );
  }, 120_000);

  afterAll(() => h?.close());

  const health = async () => (await h.request('GET', '/health', { token: null })).body;
  const recall = async (query: string) =>
    (await h.request('GET', `/memory?query=${encodeURIComponent(query)}&k=5`)).body.entries.map(
      (e: { id: string }) => e.id,
    );

  it('reports rebuilding (still 200) and answers recall exactly meanwhile, then reports ready', async () => {
    const rebuilding = await h.request('GET', '/health', { token: null });
    expect(rebuilding.status).toBe(200);
    expect(rebuilding.body).toMatchObject({
      status: 'ok',
      memory: { index: 'rebuilding', rebuilt_because: 'missing' },
      warnings: expect.arrayContaining([expect.stringMatching(/memory index is being rebuilt/)]),
    });
    expect(await Promise.all(QUERIES.map(recall))).toEqual(seeded.exactTop);
    expect((await health()).memory.index).toBe('rebuilding');

    const deadline = Date.now() + 90_000;
    while ((await health()).memory.index !== 'ready') {
      if (Date.now() > deadline) throw new Error('the memory index was not ready after 90 s');
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(await health()).toMatchObject({
      status: 'ok',
      memory: { index: 'ready', rebuilt_because: 'missing' },
    });
    expect(existsSync(`${h.dir}/runledger.db.memory.hnsw`)).toBe(true);
    const afterRebuild = await Promise.all(QUERIES.map(recall));
    expect(afterRebuild.map((ids) => ids[0])).toEqual(seeded.exactTop.map((ids) => ids[0]));
  }, 120_000);

  it('answered every request above as the OpenAPI document describes it', () => {
    expect(h.responseMismatches).toEqual([]);
  });
});
