import { Embedder } from './embedder';

const CACHE_SIZE = 256;

/** The embedder's vectors of the texts seen last (queries, a pass's texts), so a text repeated is embedded once. */
export class EmbeddingCache {
  private readonly cache = new Map<string, Float32Array>();

  constructor(private readonly embedder: Embedder) {}

  async embed(text: string): Promise<Float32Array> {
    const hit = this.cache.get(text);
    if (hit) return hit;
    const [v] = await this.embedder.embed([text]);
    this.cacheVector(text, v);
    return v;
  }

  /** The vectors of `texts`, in order: cached ones as they are, the others from one embedder call. */
  async embedAll(texts: readonly string[]): Promise<Float32Array[]> {
    const known = new Map<string, Float32Array>();
    for (const t of texts) {
      const hit = this.cache.get(t);
      if (hit) known.set(t, hit);
    }
    const missing = [...new Set(texts.filter((t) => !known.has(t)))];
    if (missing.length > 0) {
      const fresh = await this.embedder.embed(missing);
      // a batch larger than half the cache is not kept: it would push out the queries and the pass's texts
      const keep = missing.length <= CACHE_SIZE / 2;
      missing.forEach((t, i) => {
        known.set(t, fresh[i]);
        if (keep) this.cacheVector(t, fresh[i]);
      });
    }
    return texts.map((t) => known.get(t)!);
  }

  private cacheVector(text: string, v: Float32Array): void {
    if (this.cache.has(text)) return;
    if (this.cache.size >= CACHE_SIZE) this.cache.delete(this.cache.keys().next().value as string);
    this.cache.set(text, v);
  }
}
