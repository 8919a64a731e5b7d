import { Embedder } from '../embedder';

/** One adapter under test, and what ends it. */
export interface EmbedderUnderTest {
  sut: Embedder;
  close?: () => Promise<void>;
}

const norm = (v: Float32Array) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const TEXTS = ['the build failed on step 3', 'deploy the service to staging', 'a text', 'ü ünïcödé ✓', ''];

/**
 * What every Embedder promises the memory lib: one L2-normalised vector of `dim` per text, in the
 * order given, the same text the same vector, and batches that do not change the answer.
 */
export function runEmbedderConformance(name: string, make: () => Promise<EmbedderUnderTest>): void {
  describe(`Embedder conformance: ${name}`, () => {
    let under: EmbedderUnderTest;
    beforeEach(async () => {
      under = await make();
    });
    afterEach(async () => {
      await under.close?.();
    });

    it('names its model and a positive dimension', () => {
      expect(under.sut.model).toMatch(/\S/);
      expect(Number.isInteger(under.sut.dim) && under.sut.dim > 0).toBe(true);
    });

    it('gives one unit vector of its dimension per text, in order', async () => {
      const vectors = await under.sut.embed(TEXTS);
      expect(vectors).toHaveLength(TEXTS.length);
      for (const v of vectors) {
        expect(v).toBeInstanceOf(Float32Array);
        expect(v).toHaveLength(under.sut.dim);
        expect(norm(v)).toBeCloseTo(1, 4);
      }
      const one = await Promise.all(TEXTS.map((t) => under.sut.embed([t]).then((r) => r[0])));
      expect(vectors.map((v) => Array.from(v))).toEqual(one.map((v) => Array.from(v)));
    });

    it('embeds the same text to the same vector, and different texts to different ones', async () => {
      const [a, b, c] = await under.sut.embed([TEXTS[0], TEXTS[0], TEXTS[1]]);
      expect(Array.from(a)).toEqual(Array.from(b));
      expect(Array.from(a)).not.toEqual(Array.from(c));
    });

    it('answers an empty list with an empty list', async () => {
      await expect(under.sut.embed([])).resolves.toEqual([]);
    });

    it('keeps the order across more texts than one batch holds', async () => {
      const many = Array.from({ length: 150 }, (_, i) => `note number ${i}`);
      const all = await under.sut.embed(many);
      expect(all).toHaveLength(many.length);
      const [first, last] = await Promise.all([under.sut.embed([many[0]]), under.sut.embed([many[149]])]);
      expect(Array.from(all[0])).toEqual(Array.from(first[0]));
      expect(Array.from(all[149])).toEqual(Array.from(last[0]));
    });
  });
}
