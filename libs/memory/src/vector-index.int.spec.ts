import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { cosine, l2Normalise } from './embedder';
import { FLAT_UP_TO, IndexSource, IndexedVector, VectorIndex } from './vector-index';

const DIM = 24;

/** A vector from a seed: the same seed, the same vector. */
function vectorOf(seed: number): Float32Array {
  const v = new Float32Array(DIM);
  let x = (seed * 2654435761) >>> 0 || 1;
  for (let i = 0; i < DIM; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    v[i] = ((x >>> 0) / 0xffffffff) * 2 - 1;
  }
  return v;
}

/** The table as VectorIndex.open reads it. */
const sourceOf = (rows: readonly IndexedVector[]): IndexSource => ({
  async *pages() {
    yield [...rows];
  },
  deletedLabels: async () => rows.filter((r) => r.deleted).map((r) => r.label),
  maxLabel: async () => rows.reduce((m, r) => Math.max(m, r.label), -1),
});

/** The exact answer: every live label by cosine, highest first, the lower label among equals. */
function bruteForce(rows: readonly IndexedVector[], query: Float32Array, k: number): number[] {
  const q = l2Normalise(Float32Array.from(query));
  return rows
    .filter((r) => !r.deleted)
    .map((r) => ({ label: r.label, similarity: cosine(q, l2Normalise(Float32Array.from(r.vector))) }))
    .sort((a, b) => b.similarity - a.similarity || a.label - b.label)
    .slice(0, k)
    .map((h) => h.label);
}

const rowsOf = (count: number, deletedEvery = 0): IndexedVector[] =>
  Array.from({ length: count }, (_, label) => ({
    label,
    vector: vectorOf(label + 1),
    deleted: deletedEvery > 0 && label % deletedEvery === 0,
  }));

describe('VectorIndex', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'rl-vector-index-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('answers exactly while flat: the same labels, in the same order, as a brute-force scan', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: FLAT_UP_TO }),
        fc.integer({ min: 0, max: 7 }),
        fc.integer({ min: 1, max: 20 }),
        fc.integer({ min: 1, max: 10_000 }),
        (count, deletedEvery, k, querySeed) => {
          const rows = rowsOf(count, deletedEvery);
          const index = VectorIndex.create('m', DIM);
          for (const r of rows) index.add(r.label, r.vector, r.deleted);
          expect(index.layout).toBe('flat');
          const query = vectorOf(querySeed + 100_000);
          const hits = index.search(query, k);
          expect(hits.map((h) => h.label)).toEqual(bruteForce(rows, query, k));
          for (const h of hits)
            expect(h.similarity).toBeCloseTo(
              cosine(
                l2Normalise(Float32Array.from(query)),
                l2Normalise(Float32Array.from(vectorOf(h.label + 1))),
              ),
              5,
            );
        },
      ),
      { numRuns: 60 },
    );
  });

  it('builds its graph when one more label than FLAT_UP_TO is added, keeping every vector and tombstone', () => {
    const rows = rowsOf(FLAT_UP_TO + 1, 5);
    const index = VectorIndex.create('m', DIM);
    for (const r of rows.slice(0, FLAT_UP_TO)) index.add(r.label, r.vector, r.deleted);
    expect(index.layout).toBe('flat');
    const last = rows[FLAT_UP_TO];
    index.add(last.label, last.vector, last.deleted);
    expect(index.layout).toBe('hnsw');
    expect(index.size).toBe(rows.filter((r) => !r.deleted).length);
    for (const r of rows) {
      expect(index.has(r.label)).toBe(true);
      const [nearest] = index.search(r.vector, 1);
      // a live vector finds itself; a deleted one is never returned
      if (r.deleted) expect(nearest.label).not.toBe(r.label);
      else expect(nearest).toEqual({ label: r.label, similarity: expect.closeTo(1, 5) });
    }
  });

  it.each([
    ['flat', FLAT_UP_TO],
    ['hnsw', 0],
  ])('leaves a label added again as it was, live or deleted (%s)', (layout, flatUpTo) => {
    const rows = rowsOf(20, 4);
    const index = VectorIndex.create('m', DIM, undefined, 1024, flatUpTo);
    for (const r of rows) index.add(r.label, r.vector, r.deleted);
    expect(index.layout).toBe(layout);
    const size = index.size;
    // label 4 is deleted, label 5 live: added again with another vector, neither changes
    index.add(4, vectorOf(77));
    index.add(5, vectorOf(77));
    expect(index.size).toBe(size);
    expect(index.search(vectorOf(77), 3).map((h) => h.label)).not.toContain(4);
    expect(index.search(rows[5].vector, 1)[0]).toEqual({ label: 5, similarity: expect.closeTo(1, 5) });
    // added again as deleted, a live label is deleted
    index.add(5, rows[5].vector, true);
    expect(index.size).toBe(size - 1);
    expect(index.search(rows[5].vector, 1)[0].label).not.toBe(5);
  });

  it.each([
    ['flat', FLAT_UP_TO],
    ['hnsw', 0],
  ])(
    'leaves a label it never held out of a removal: size and search unchanged, the label still addable (%s)',
    (layout, flatUpTo) => {
      const rows = rowsOf(20).filter((r) => r.label !== 7);
      const index = VectorIndex.create('m', DIM, undefined, 1024, flatUpTo);
      for (const r of rows) index.add(r.label, r.vector);
      expect(index.layout).toBe(layout);
      index.remove(7);
      expect(index.size).toBe(19);
      expect(index.has(7)).toBe(false);
      index.add(7, vectorOf(8));
      expect(index.size).toBe(20);
      expect(index.search(vectorOf(8), 1)[0]).toEqual({ label: 7, similarity: expect.closeTo(1, 5) });
      // a label it holds is still removed, once
      index.remove(7);
      index.remove(7);
      expect(index.size).toBe(19);
    },
  );

  it('saves a flat index as its vectors and opens it again, tombstones included, without rebuilding', async () => {
    const path = join(dir, 'memory.hnsw');
    const rows = rowsOf(40, 3);
    const source = sourceOf(rows);
    const first = await VectorIndex.open(path, 'm', DIM, source);
    expect(first.rebuiltBecause).toBe('missing');
    expect(first.layout).toBe('flat');
    // format 2: code that knows only hnswlib's files refuses the meta and rebuilds, never loading it as a graph
    expect(JSON.parse(readFileSync(`${path}.meta.json`, 'utf8'))).toMatchObject({
      format: 2,
      layout: 'flat',
      count: 40,
    });

    const reopened = await VectorIndex.open(path, 'm', DIM, source);
    expect(reopened.rebuiltBecause).toBeNull();
    expect(reopened.layout).toBe('flat');
    expect(reopened.size).toBe(first.size);
    const query = vectorOf(999);
    expect(reopened.search(query, 10)).toEqual(first.search(query, 10));
    expect(reopened.search(query, 10).map((h) => h.label)).toEqual(bruteForce(rows, query, 10));
  });

  it('catches a reopened flat index up with the table, building the graph once the table outgrew it', async () => {
    const path = join(dir, 'memory.hnsw');
    const rows = rowsOf(FLAT_UP_TO + 30, 4);
    await VectorIndex.open(path, 'm', DIM, sourceOf(rows.slice(0, 100)));
    const grown = await VectorIndex.open(path, 'm', DIM, sourceOf(rows));
    expect(grown.rebuiltBecause).toBeNull();
    expect(grown.layout).toBe('hnsw');
    expect(grown.size).toBe(rows.filter((r) => !r.deleted).length);
    for (const r of rows.filter((x) => !x.deleted).slice(-5))
      expect(grown.search(r.vector, 1)[0].label).toBe(r.label);
    // saved as the graph it now is, and loaded as one
    const again = await VectorIndex.open(path, 'm', DIM, sourceOf(rows));
    expect(again.rebuiltBecause).toBeNull();
    expect(again.layout).toBe('hnsw');
    expect(JSON.parse(readFileSync(`${path}.meta.json`, 'utf8'))).toMatchObject({
      format: 1,
      layout: 'hnsw',
    });
  });

  it('tells whether catching a flat file up with the table would build the graph: past FLAT_UP_TO labels, not at it', async () => {
    const path = join(dir, 'memory.hnsw');
    const rows = rowsOf(FLAT_UP_TO + 1, 4);
    const outgrown = async (table: readonly IndexedVector[]) =>
      VectorIndex.outgrowsFlat(await VectorIndex.inspect(path, 'm', DIM, sourceOf(table)));
    await VectorIndex.open(path, 'm', DIM, sourceOf(rows.slice(0, 100)));
    expect(await outgrown(rows.slice(0, FLAT_UP_TO))).toBe(false);
    expect(await outgrown(rows)).toBe(true);
    // a graph file is never outgrown, and a file without its meta is rebuilt, not outgrown
    await VectorIndex.open(path, 'm', DIM, sourceOf(rows));
    expect(await outgrown(rows)).toBe(false);
    rmSync(`${path}.meta.json`);
    expect(await outgrown(rows)).toBe(false);
  });

  it('loads a graph file whose meta predates the layout field', async () => {
    const path = join(dir, 'memory.hnsw');
    const rows = rowsOf(FLAT_UP_TO + 10);
    await VectorIndex.open(path, 'm', DIM, sourceOf(rows));
    const meta = JSON.parse(readFileSync(`${path}.meta.json`, 'utf8')) as Record<string, unknown>;
    delete meta.layout;
    writeFileSync(`${path}.meta.json`, JSON.stringify(meta));
    const loaded = await VectorIndex.open(path, 'm', DIM, sourceOf(rows));
    expect(loaded.rebuiltBecause).toBeNull();
    expect(loaded.layout).toBe('hnsw');
    expect(loaded.search(rows[7].vector, 1)[0].label).toBe(7);
  });

  it('rebuilds from the table when a flat file does not hold what its meta says', async () => {
    const path = join(dir, 'memory.hnsw');
    const rows = rowsOf(12);
    await VectorIndex.open(path, 'm', DIM, sourceOf(rows));
    // a file cut short, its checksum made to match: the reader itself must refuse it
    const cut = readFileSync(path).subarray(0, 100);
    writeFileSync(path, cut);
    const meta = JSON.parse(readFileSync(`${path}.meta.json`, 'utf8')) as Record<string, unknown>;
    const { createHash } = await import('node:crypto');
    meta.sha256 = createHash('sha256').update(cut).digest('hex');
    writeFileSync(`${path}.meta.json`, JSON.stringify(meta));
    const rebuilt = await VectorIndex.open(path, 'm', DIM, sourceOf(rows));
    expect(rebuilt.rebuiltBecause).toMatch(/^unreadable: flat index file/);
    expect(rebuilt.size).toBe(12);
    expect(existsSync(path)).toBe(true);
    expect(rebuilt.search(rows[3].vector, 1)[0].label).toBe(3);
  });
});
