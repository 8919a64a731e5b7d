import { MemoryStore, vectorToBuffer } from '../memory-store';

/** One database under test, migrated, and what ends it. */
export interface MemoryStoreUnderTest {
  sut: MemoryStore;
  close: () => Promise<void>;
}

const AT = '2026-01-01T00:00:00.000Z';
const LATER = '2026-01-02T00:00:00.000Z';

const row = (id: string, over: Partial<Parameters<MemoryStore['insertIfAbsent']>[0]> = {}) => ({
  id,
  text: `text of ${id}`,
  kind: 'fact',
  source: 'user',
  weight: 0.5,
  task_id: null,
  session_id: 'ses_a',
  metadata: JSON.stringify({ from: id }),
  embedding_model: 'hash',
  embedding_dim: 4,
  vector: vectorToBuffer(Float32Array.from([1, 0, 0, 0])),
  deleted: 0,
  written_by: 'test',
  created_at: AT,
  updated_at: AT,
  ...over,
});

/**
 * What every database the memory lib runs on must do the same: labels given in order and never
 * twice, an insert of a known id ignored, weights, tombstones, vectors, filters and the
 * projection's checkpoint, which never moves back.
 */
export function runMemoryStoreConformance(name: string, make: () => Promise<MemoryStoreUnderTest>): void {
  describe(`MemoryStore conformance: ${name}`, () => {
    let under: MemoryStoreUnderTest;
    let sut: MemoryStore;
    beforeEach(async () => {
      under = await make();
      sut = under.sut;
    });
    afterEach(async () => {
      await under.close();
    });

    it('labels inserts 0, 1, 2 in order; an insert of a stored id is ignored and answers null', async () => {
      expect(await sut.insertIfAbsent(row('m1'))).toBe(0);
      expect(await sut.insertIfAbsent(row('m2'))).toBe(1);
      expect(await sut.insertIfAbsent(row('m1', { text: 'other' }))).toBeNull();
      expect(await sut.insertIfAbsent(row('m3'))).toBe(2);
      expect(await sut.stats()).toEqual({ rows: 3, max_label: 2 });
      expect((await sut.get('m1'))?.text).toBe('text of m1');
    });

    it('labels concurrent inserts distinctly', async () => {
      const labels = await Promise.all(
        Array.from({ length: 20 }, (_, i) => sut.insertIfAbsent(row(`c${i}`))),
      );
      expect(new Set(labels).size).toBe(20);
      expect([...labels].sort((a, b) => a! - b!)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    });

    it('reads an entry back as written: the contract fields, its metadata parsed, its vector', async () => {
      await sut.insertIfAbsent(row('m1', { weight: 0.7, task_id: 'task_1' }));
      expect(await sut.get('m1')).toMatchObject({
        id: 'm1',
        label: 0,
        kind: 'fact',
        source: 'user',
        weight: 0.7,
        task_id: 'task_1',
        session_id: 'ses_a',
        metadata: { from: 'm1' },
        embedding_model: 'hash',
        embedding_dim: 4,
        deleted: false,
        written_by: 'test',
        created_at: AT,
      });
      expect(Array.from((await sut.vector('m1'))!)).toEqual([1, 0, 0, 0]);
      expect(await sut.get('missing')).toBeNull();
      expect(await sut.vector('missing')).toBeNull();
    });

    it('sets a weight and tombstones an entry: a tombstone leaves the lists and counts, not the table', async () => {
      await sut.insertIfAbsent(row('m1'));
      await sut.insertIfAbsent(row('m2'));
      await sut.setWeight('m1', 0.9, LATER);
      expect(await sut.get('m1')).toMatchObject({ weight: 0.9, updated_at: LATER });
      await sut.tombstone('m2', LATER);
      expect(await sut.get('m2')).toMatchObject({ deleted: true, updated_at: LATER });
      expect(await sut.countActive()).toBe(1);
      expect((await sut.list({}, 10)).map((e) => e.id)).toEqual(['m1']);
      expect(await sut.deletedLabels()).toEqual([1]);
    });

    it('filters by kind, session, task and weight; lists newest first, up to the limit', async () => {
      await sut.insertIfAbsent(row('a', { kind: 'fact', weight: 0.2, created_at: AT }));
      await sut.insertIfAbsent(row('b', { kind: 'tool_result', session_id: 'ses_b', created_at: LATER }));
      await sut.insertIfAbsent(row('c', { kind: 'fact', task_id: 'task_9', weight: 0.8, created_at: LATER }));
      expect((await sut.list({ kind: 'fact' }, 10)).map((e) => e.id).sort()).toEqual(['a', 'c']);
      expect((await sut.list({ session_id: 'ses_b' }, 10)).map((e) => e.id)).toEqual(['b']);
      expect((await sut.list({ task_id: 'task_9' }, 10)).map((e) => e.id)).toEqual(['c']);
      expect((await sut.list({ min_weight: 0.5 }, 10)).map((e) => e.id).sort()).toEqual(['b', 'c']);
      expect(await sut.list({}, 1)).toHaveLength(1);
      expect((await sut.list({}, 3))[2].id).toBe('a');
      expect(await sut.countActive({ kind: 'fact' })).toBe(2);
    });

    it('filters by a set of sessions, null standing for the entries written for nobody', async () => {
      await sut.insertIfAbsent(row('a', { session_id: 'ses_a' }));
      await sut.insertIfAbsent(row('b', { session_id: 'ses_b' }));
      await sut.insertIfAbsent(row('n', { session_id: null }));
      await sut.insertIfAbsent(row('c', { session_id: 'ses_c', kind: 'plan' }));
      const ids = async (sessions: (string | null)[], kind?: 'plan') =>
        (await sut.list({ sessions, kind }, 10)).map((e) => e.id).sort();
      expect(await ids(['ses_b', null])).toEqual(['b', 'n']);
      expect(await ids(['ses_a', 'ses_c'])).toEqual(['a', 'c']);
      expect(await ids([null])).toEqual(['n']);
      expect(await ids([])).toEqual([]);
      expect(await ids(['ses_c', null], 'plan')).toEqual(['c']);
      expect(await sut.countActive({ sessions: ['ses_a', null] })).toBe(2);
      expect((await sut.withVectors({ sessions: ['ses_b'] }, 10)).map((r) => r.entry.id)).toEqual(['b']);
    });

    it('reads entries by ids and by labels, and every row a page at a time in label order', async () => {
      for (const id of ['x0', 'x1', 'x2', 'x3', 'x4']) await sut.insertIfAbsent(row(id));
      expect([...(await sut.byIds(['x1', 'x3', 'nope'])).keys()].sort()).toEqual(['x1', 'x3']);
      expect([...(await sut.byLabels([0, 4])).values()].map((e) => e.id).sort()).toEqual(['x0', 'x4']);
      const labels: number[] = [];
      for await (const page of sut.vectorPages(2)) labels.push(...page.map((r) => r.label));
      expect(labels).toEqual([0, 1, 2, 3, 4]);
    });

    it("keeps the projection's checkpoint, which never moves back", async () => {
      expect(await sut.checkpoint()).toBe(0);
      await sut.setCheckpoint(42);
      await sut.setCheckpoint(17);
      expect(await sut.checkpoint()).toBe(42);
      await sut.setCheckpoint(43);
      expect(await sut.checkpoint()).toBe(43);
    });
  });
}
