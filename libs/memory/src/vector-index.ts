import { createHash } from 'node:crypto';
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { HierarchicalNSW } from 'hnswlib-node';
import { z } from 'zod';

export interface HnswParams {
  /** graph degree */
  m: number;
  efConstruction: number;
  /** search beam; raised to k when k is larger */
  ef: number;
}

/**
 * From `npm run bench -- memory` (100k x 384, half structured random, half hashed text, 2 shared cores):
 * ef 128 is the smallest sweep value with recall@10 >= 0.95 on both halves (0.973 overall).
 * efConstruction 200 gained ~0.01 recall for twice the build time; M 24 ~0.02 at ef 64 for ~3x.
 */
export const DEFAULT_HNSW: HnswParams = { m: 16, efConstruction: 100, ef: 128 };

/** What the index was built from; a mismatch with the current embedder forces a rebuild. */
const IndexMeta = z.object({
  format: z.literal(1),
  model: z.string(),
  dim: z.number().int().positive(),
  /** labels in the index file, tombstones included */
  count: z.number().int().nonnegative(),
  max_label: z.number().int(),
  sha256: z.string(),
});
type IndexMeta = z.infer<typeof IndexMeta>;

export interface IndexedVector {
  label: number;
  vector: Float32Array;
  deleted: boolean;
}

/** Where the index comes from when its file cannot be trusted: the table. */
export interface IndexSource {
  pages(): AsyncIterable<IndexedVector[]>;
  /** labels tombstoned in the table (re-marked after loading a file saved before the delete) */
  deletedLabels(): Promise<number[]>;
  /** highest label in the table, -1 when empty */
  maxLabel(): Promise<number>;
}

export interface VectorHit {
  label: number;
  /** cosine similarity, 1 = same direction */
  similarity: number;
}

const sha256File = (path: string): string => createHash('sha256').update(readFileSync(path)).digest('hex');

/**
 * Cosine HNSW over hnswlib-node, persisted to `path` with `path.meta.json`
 * beside it. Deletes are markDelete tombstones: a label is never reused, so a
 * stale hit can always be resolved against the table.
 */
export class VectorIndex {
  private index: HierarchicalNSW;
  private capacity: number;
  private count = 0;
  private maxLabel = -1;
  private readonly deleted = new Set<number>();
  private dirty = false;
  private currentEf = -1;
  /** why the last open rebuilt from the table (null: the file was used) */
  rebuiltBecause: string | null = null;

  private constructor(
    readonly path: string | null,
    readonly model: string,
    readonly dim: number,
    private readonly params: HnswParams,
    capacity: number,
  ) {
    this.capacity = Math.max(capacity, 1024);
    this.index = new HierarchicalNSW('cosine', dim);
    this.index.initIndex({
      maxElements: this.capacity,
      m: params.m,
      efConstruction: params.efConstruction,
      randomSeed: 100,
    });
    this.index.setEf(params.ef);
    this.currentEf = params.ef;
  }

  /** Empty, in memory only (benchmarks, tests). */
  static create(model: string, dim: number, params: HnswParams = DEFAULT_HNSW, capacity = 1024): VectorIndex {
    return new VectorIndex(null, model, dim, params, capacity);
  }

  /** Empty, to be filled and saved to `path` (a rebuild, here or in a worker thread). */
  static empty(path: string, model: string, dim: number, params: HnswParams = DEFAULT_HNSW): VectorIndex {
    return new VectorIndex(path, model, dim, params, 1024);
  }

  /**
   * Load `path` when its meta names this model and dim and its checksum holds,
   * then catch up with the table (rows added or tombstoned after the last save);
   * otherwise rebuild from the table.
   */
  static async open(
    path: string,
    model: string,
    dim: number,
    source: IndexSource,
    params: HnswParams = DEFAULT_HNSW,
  ): Promise<VectorIndex> {
    const reason = await VectorIndex.unusableBecause(path, model, dim, source);
    if (reason === null) {
      const meta = IndexMeta.parse(JSON.parse(readFileSync(`${path}.meta.json`, 'utf8')));
      const vi = new VectorIndex(path, model, dim, params, meta.count);
      // hnswlib's loader corrupts the native heap on a file saved with no elements; an empty
      // index has nothing to load, so it starts fresh and catches up with the table.
      if (meta.count === 0) {
        vi.maxLabel = meta.max_label;
        await vi.catchUp(source);
        return vi;
      }
      try {
        vi.index.readIndexSync(path, false);
        if (vi.index.getNumDimensions() !== dim || vi.index.getCurrentCount() !== meta.count)
          throw new Error('count or dim differs from meta');
        vi.index.setEf(params.ef);
        vi.currentEf = params.ef;
        vi.capacity = vi.index.getMaxElements();
        if (vi.capacity < 1024) {
          vi.capacity = 1024;
          vi.index.resizeIndex(vi.capacity);
        }
        vi.count = meta.count;
        vi.maxLabel = meta.max_label;
        await vi.catchUp(source);
        return vi;
      } catch (e) {
        return VectorIndex.rebuild(path, model, dim, source, params, `unreadable: ${(e as Error).message}`);
      }
    }
    return VectorIndex.rebuild(path, model, dim, source, params, reason);
  }

  /** Why the file at `path` cannot be loaded as it is (then it is rebuilt from the table), or null. */
  static async unusableBecause(
    path: string,
    model: string,
    dim: number,
    source: IndexSource,
  ): Promise<string | null> {
    if (!existsSync(path) || !existsSync(`${path}.meta.json`)) return 'missing';
    let meta: IndexMeta;
    try {
      meta = IndexMeta.parse(JSON.parse(readFileSync(`${path}.meta.json`, 'utf8')));
    } catch {
      return 'corrupt meta';
    }
    if (meta.model !== model || meta.dim !== dim)
      return `built by ${meta.model}/${meta.dim}, now ${model}/${dim}`;
    // A table restored from an older backup: the file holds labels the table will hand out again.
    if (meta.max_label > (await source.maxLabel())) return 'index is ahead of the table';
    // The C++ loader trusts its input; a checksum keeps a damaged file away from it.
    if (sha256File(path) !== meta.sha256) return 'corrupt (checksum mismatch)';
    return null;
  }

  private static async rebuild(
    path: string,
    model: string,
    dim: number,
    source: IndexSource,
    params: HnswParams,
    reason: string,
  ): Promise<VectorIndex> {
    const vi = VectorIndex.empty(path, model, dim, params);
    vi.rebuiltBecause = reason;
    for await (const page of source.pages()) for (const v of page) vi.add(v.label, v.vector, v.deleted);
    vi.save();
    return vi;
  }

  private async catchUp(source: IndexSource): Promise<void> {
    for await (const page of source.pages()) {
      for (const v of page) if (v.label > this.maxLabel) this.add(v.label, v.vector, v.deleted);
    }
    for (const label of await source.deletedLabels()) this.remove(label);
    if (this.dirty) this.save();
  }

  get size(): number {
    return this.count - this.deleted.size;
  }

  add(label: number, vector: Float32Array, deleted = false): void {
    if (vector.length !== this.dim) throw new Error(`vector dim ${vector.length}, index dim ${this.dim}`);
    if (this.count >= this.capacity) {
      this.capacity = Math.max(this.capacity * 2, 1024);
      this.index.resizeIndex(this.capacity);
    }
    this.index.addPoint(Array.from(vector), label);
    this.count++;
    this.maxLabel = Math.max(this.maxLabel, label);
    this.dirty = true;
    if (deleted) this.remove(label);
  }

  /** Whether `label` was added (live or deleted): another instance's entry may already be here. */
  has(label: number): boolean {
    if (this.deleted.has(label)) return true;
    if (label > this.maxLabel) return false;
    try {
      this.index.getPoint(label);
      return true;
    } catch {
      return false;
    }
  }

  remove(label: number): void {
    if (this.deleted.has(label) || label > this.maxLabel) return;
    try {
      this.index.markDelete(label);
    } catch {
      // already deleted in a loaded file: the set simply learns it
    }
    this.deleted.add(label);
    this.dirty = true;
  }

  search(vector: Float32Array, k: number, ef = this.params.ef): VectorHit[] {
    const n = Math.min(k, this.size);
    if (n <= 0) return [];
    const wanted = Math.max(ef, n);
    // setEf is a native call; skip it when nothing changes (the common case)
    if (wanted !== this.currentEf) {
      this.index.setEf(wanted);
      this.currentEf = wanted;
    }
    const res = this.index.searchKnn(Array.from(vector), n);
    return res.neighbors.map((label, i) => ({ label, similarity: 1 - res.distances[i] }));
  }

  /** Index file first, then its meta (with the checksum): a crash in between leaves a mismatch, hence a rebuild. */
  save(): void {
    if (!this.path) return;
    const tmp = `${this.path}.tmp`;
    this.index.writeIndexSync(tmp);
    renameSync(tmp, this.path);
    const meta: IndexMeta = {
      format: 1,
      model: this.model,
      dim: this.dim,
      count: this.count,
      max_label: this.maxLabel,
      sha256: sha256File(this.path),
    };
    writeFileSync(`${this.path}.meta.json.tmp`, JSON.stringify(meta));
    renameSync(`${this.path}.meta.json.tmp`, `${this.path}.meta.json`);
    this.dirty = false;
  }

  saveIfDirty(): void {
    if (this.dirty) this.save();
  }

  static removeFiles(path: string): void {
    rmSync(path, { force: true });
    rmSync(`${path}.meta.json`, { force: true });
  }
}
