import { createHash } from 'node:crypto';
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { HierarchicalNSW } from 'hnswlib-node';
import { z } from 'zod';
import { cosine, l2Normalise } from './vector-math';
import { TopK } from './top-k';

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

/**
 * Up to this many labels (tombstones included) the index keeps its vectors in a flat list and
 * scans them exactly; the HNSW graph is built when one more is added. Measured here (384
 * dimensions): an hnswlib-node insert costs 50-140 us and a search 45-65 us up to a few hundred
 * entries (the binding reads each vector element by element), a flat insert about 1 us and a scan
 * about 0.35 us an entry (90 us for 256, k 10). At 256 a scan costs up to twice a search, which the
 * inserts it saves outweigh; the graph is built once, for all 257 (15-35 ms on whichever thread adds
 * the 257th).
 */
export const FLAT_UP_TO = 256;

/** What the index was built from; a mismatch with the current embedder forces a rebuild. */
const IndexMeta = z.object({
  /** 2 for a flat file: code that knows only format 1 (hnswlib's graph) refuses its meta and rebuilds */
  format: z.union([z.literal(1), z.literal(2)]),
  /** `flat`: the file holds the vectors themselves (see FLAT_UP_TO); `hnsw`: hnswlib's graph */
  layout: z.enum(['hnsw', 'flat']).default('hnsw'),
  model: z.string(),
  dim: z.number().int().positive(),
  /** labels in the index file, tombstones included */
  count: z.number().int().nonnegative(),
  max_label: z.number().int(),
  sha256: z.string(),
});
type IndexMeta = z.infer<typeof IndexMeta>;

/**
 * One look at an index file: why it must be rebuilt from the table, or the meta it loads by (with
 * the table's highest label when looked at). `open` takes it, so a caller that looked first does not
 * read and checksum the file twice.
 */
export type IndexFile = { unusable: string } | { unusable: null; meta: IndexMeta; tableMaxLabel: number };

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
 * The flat layout's file: a header (count, dim as uint32 LE), then per label its number (float64
 * LE), a deleted flag (uint32 LE) and its unit vector (dim float32 in the machine's byte order, as
 * hnswlib writes its own file: little-endian wherever this runs).
 */
const FLAT_HEADER = 8;
const flatRecordBytes = (dim: number): number => 12 + 4 * dim;

/** The vectors of a small index, made unit length (as hnswlib's cosine space does), in the order they were added. */
class FlatVectors {
  readonly labels: number[] = [];
  readonly vectors: Float32Array[] = [];
  private readonly at = new Map<number, number>();

  get count(): number {
    return this.labels.length;
  }

  has(label: number): boolean {
    return this.at.has(label);
  }

  /** `label` must be new (VectorIndex.add checks). */
  add(label: number, vector: Float32Array): void {
    this.push(label, l2Normalise(Float32Array.from(vector)));
  }

  private push(label: number, unitVector: Float32Array): void {
    this.at.set(label, this.labels.length);
    this.labels.push(label);
    this.vectors.push(unitVector);
  }

  /** The `n` most similar labels not in `deleted`, most similar first (the lower label among equals). */
  search(query: Float32Array, n: number, deleted: ReadonlySet<number>): VectorHit[] {
    const q = l2Normalise(Float32Array.from(query));
    const top = new TopK<VectorHit>(
      n,
      (h) => h.similarity,
      (h) => h.label,
    );
    for (let i = 0; i < this.labels.length; i++) {
      const label = this.labels[i];
      if (deleted.has(label)) continue;
      const similarity = cosine(q, this.vectors[i]);
      if (top.admits(similarity, label)) top.add(similarity, label, { label, similarity });
    }
    return top.items;
  }

  write(path: string, dim: number, deleted: ReadonlySet<number>): void {
    const record = flatRecordBytes(dim);
    const buf = Buffer.alloc(FLAT_HEADER + record * this.count);
    buf.writeUInt32LE(this.count, 0);
    buf.writeUInt32LE(dim, 4);
    for (let i = 0; i < this.count; i++) {
      const at = FLAT_HEADER + i * record;
      buf.writeDoubleLE(this.labels[i], at);
      buf.writeUInt32LE(deleted.has(this.labels[i]) ? 1 : 0, at + 8);
      Buffer.from(this.vectors[i].buffer, this.vectors[i].byteOffset, 4 * dim).copy(buf, at + 12);
    }
    writeFileSync(path, buf);
  }

  /** The labels and vectors of a flat file, and which of them were deleted; throws on a malformed one. */
  static read(path: string, dim: number): { flat: FlatVectors; deleted: number[] } {
    const buf = readFileSync(path);
    if (buf.length < FLAT_HEADER) throw new Error('flat index file is shorter than its header');
    const count = buf.readUInt32LE(0);
    const record = flatRecordBytes(dim);
    if (buf.readUInt32LE(4) !== dim || buf.length !== FLAT_HEADER + count * record)
      throw new Error('flat index file does not match its dim and count');
    const flat = new FlatVectors();
    const deleted: number[] = [];
    for (let i = 0; i < count; i++) {
      const at = FLAT_HEADER + i * record;
      const label = buf.readDoubleLE(at);
      const vector = new Float32Array(dim);
      Buffer.from(vector.buffer).set(buf.subarray(at + 12, at + record));
      flat.push(label, vector);
      if (buf.readUInt32LE(at + 8) === 1) deleted.push(label);
    }
    return { flat, deleted };
  }
}

/**
 * Cosine nearest neighbours, persisted to `path` with `path.meta.json` beside
 * it: up to `flatUpTo` labels a flat list of unit vectors scanned exactly,
 * past that an HNSW graph over hnswlib-node. Deletes are tombstones (markDelete
 * in the graph): a label is never reused, so a stale hit can always be
 * resolved against the table.
 */
export class VectorIndex {
  /** the graph, once the index outgrew its flat list (null while flat) */
  private graph: HierarchicalNSW | null = null;
  private flat: FlatVectors | null = new FlatVectors();
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
    private readonly flatUpTo: number,
  ) {
    this.capacity = Math.max(capacity, 1024);
  }

  /** Empty, in memory only (benchmarks, tests); `flatUpTo` 0 builds the graph from the first vector. */
  static create(
    model: string,
    dim: number,
    params: HnswParams = DEFAULT_HNSW,
    capacity = 1024,
    flatUpTo = FLAT_UP_TO,
  ): VectorIndex {
    return new VectorIndex(null, model, dim, params, capacity, flatUpTo);
  }

  /** Empty, to be filled and saved to `path` (a rebuild, here or in a worker thread). */
  static empty(path: string, model: string, dim: number, params: HnswParams = DEFAULT_HNSW): VectorIndex {
    return new VectorIndex(path, model, dim, params, 1024, FLAT_UP_TO);
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
    file?: IndexFile,
  ): Promise<VectorIndex> {
    const looked = file ?? (await VectorIndex.inspect(path, model, dim, source));
    if (looked.unusable !== null)
      return VectorIndex.rebuild(path, model, dim, source, params, looked.unusable);
    const { meta } = looked;
    const vi = new VectorIndex(path, model, dim, params, meta.count, FLAT_UP_TO);
    vi.maxLabel = meta.max_label;
    // hnswlib's loader corrupts the native heap on a file saved with no elements; an empty
    // index has nothing to load, so it starts fresh and catches up with the table.
    if (meta.count === 0) {
      await vi.catchUp(source);
      return vi;
    }
    try {
      if (meta.layout === 'flat') vi.loadFlat(path, meta.count);
      else vi.loadGraph(path, meta.count);
      await vi.catchUp(source);
      return vi;
    } catch (e) {
      return VectorIndex.rebuild(path, model, dim, source, params, `unreadable: ${(e as Error).message}`);
    }
  }

  private loadFlat(path: string, count: number): void {
    const { flat, deleted } = FlatVectors.read(path, this.dim);
    if (flat.count !== count) throw new Error('count differs from meta');
    this.flat = flat;
    this.count = count;
    for (const label of deleted) this.deleted.add(label);
    if (count > this.flatUpTo) {
      this.buildGraph();
      this.dirty = true;
    }
  }

  private loadGraph(path: string, count: number): void {
    const graph = new HierarchicalNSW('cosine', this.dim);
    graph.readIndexSync(path, false);
    if (graph.getNumDimensions() !== this.dim || graph.getCurrentCount() !== count)
      throw new Error('count or dim differs from meta');
    this.capacity = graph.getMaxElements();
    if (this.capacity < 1024) {
      this.capacity = 1024;
      graph.resizeIndex(this.capacity);
    }
    this.useGraph(graph);
    this.count = count;
  }

  private useGraph(graph: HierarchicalNSW): void {
    graph.setEf(this.params.ef);
    this.currentEf = this.params.ef;
    this.graph = graph;
    this.flat = null;
  }

  /** The flat list outgrew FLAT_UP_TO: its vectors (tombstones too, as the graph keeps them) go into a graph. */
  private buildGraph(): void {
    const flat = this.flat!;
    this.capacity = Math.max(this.capacity, flat.count * 2, 1024);
    const graph = new HierarchicalNSW('cosine', this.dim);
    graph.initIndex({
      maxElements: this.capacity,
      m: this.params.m,
      efConstruction: this.params.efConstruction,
      randomSeed: 100,
    });
    for (let i = 0; i < flat.count; i++) {
      graph.addPoint(Array.from(flat.vectors[i]), flat.labels[i]);
      if (this.deleted.has(flat.labels[i])) graph.markDelete(flat.labels[i]);
    }
    this.useGraph(graph);
  }

  /** The file at `path`, looked at: why it cannot be loaded as it is (then it is rebuilt from the table), or its meta. */
  static async inspect(path: string, model: string, dim: number, source: IndexSource): Promise<IndexFile> {
    if (!existsSync(path) || !existsSync(`${path}.meta.json`)) return { unusable: 'missing' };
    let meta: IndexMeta;
    try {
      meta = IndexMeta.parse(JSON.parse(readFileSync(`${path}.meta.json`, 'utf8')));
    } catch {
      return { unusable: 'corrupt meta' };
    }
    if (meta.model !== model || meta.dim !== dim)
      return { unusable: `built by ${meta.model}/${meta.dim}, now ${model}/${dim}` };
    const tableMaxLabel = await source.maxLabel();
    // A table restored from an older backup: the file holds labels the table will hand out again.
    if (meta.max_label > tableMaxLabel) return { unusable: 'index is ahead of the table' };
    // The C++ loader trusts its input; a checksum keeps a damaged file away from it.
    if (sha256File(path) !== meta.sha256) return { unusable: 'corrupt (checksum mismatch)' };
    return { unusable: null, meta, tableMaxLabel };
  }

  /**
   * Whether loading `file` and catching it up with the table would turn its flat list into the
   * graph, which `open` does on the thread that calls it. Labels are handed out in increasing
   * order, so the table holds at most its max label less the file's labels the file has not seen.
   */
  static outgrowsFlat(file: IndexFile): boolean {
    if (file.unusable !== null || file.meta.layout !== 'flat') return false;
    return file.meta.count + (file.tableMaxLabel - file.meta.max_label) > FLAT_UP_TO;
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

  /** `flat` while the vectors are scanned exactly, `hnsw` once the graph is built. */
  get layout(): 'flat' | 'hnsw' {
    return this.flat ? 'flat' : 'hnsw';
  }

  /** Adds a label not in the index yet; a label already added (live or deleted) is left as it is, since labels are never reused. */
  add(label: number, vector: Float32Array, deleted = false): void {
    if (vector.length !== this.dim) throw new Error(`vector dim ${vector.length}, index dim ${this.dim}`);
    if (this.has(label)) {
      if (deleted) this.remove(label);
      return;
    }
    if (this.outgrowsFlatWith(label)) this.buildGraph();
    if (this.flat) {
      this.count++;
      this.flat.add(label, vector);
    } else {
      if (this.count >= this.capacity) {
        this.capacity = Math.max(this.capacity * 2, 1024);
        this.graph!.resizeIndex(this.capacity);
      }
      this.graph!.addPoint(Array.from(vector), label);
      this.count++;
    }
    this.maxLabel = Math.max(this.maxLabel, label);
    this.dirty = true;
    if (deleted) this.remove(label);
  }

  /** Whether adding `label` would turn the flat list into hnswlib's graph (see FLAT_UP_TO). */
  outgrowsFlatWith(label: number): boolean {
    return this.flat !== null && this.flat.count >= this.flatUpTo && !this.has(label);
  }

  /** Whether `label` was added (live or deleted): another instance's entry may already be here. */
  has(label: number): boolean {
    if (this.deleted.has(label)) return true;
    if (label > this.maxLabel) return false;
    if (this.flat) return this.flat.has(label);
    try {
      this.graph!.getPoint(label);
      return true;
    } catch {
      return false;
    }
  }

  /** Marks an added label deleted; a label never added (a gap below the highest) is left alone. */
  remove(label: number): void {
    if (this.deleted.has(label) || label > this.maxLabel) return;
    if (this.flat && !this.flat.has(label)) return;
    if (this.graph) {
      try {
        this.graph.markDelete(label);
      } catch (err) {
        // hnswlib tells a label it never held ("Label not found") from one a loaded file has deleted
        // already, which the set simply learns
        if (/not found/i.test((err as Error).message)) return;
      }
    }
    this.deleted.add(label);
    this.dirty = true;
  }

  search(vector: Float32Array, k: number, ef = this.params.ef): VectorHit[] {
    const n = Math.min(k, this.size);
    if (n <= 0) return [];
    if (this.flat) return this.flat.search(vector, n, this.deleted);
    const graph = this.graph!;
    const wanted = Math.max(ef, n);
    // setEf is a native call; skip it when nothing changes (the common case)
    if (wanted !== this.currentEf) {
      graph.setEf(wanted);
      this.currentEf = wanted;
    }
    const res = graph.searchKnn(Array.from(vector), n);
    return res.neighbors.map((label, i) => ({ label, similarity: 1 - res.distances[i] }));
  }

  /** Index file first, then its meta (with the checksum): a crash in between leaves a mismatch, hence a rebuild. */
  save(): void {
    if (!this.path) return;
    const tmp = `${this.path}.tmp`;
    if (this.flat) this.flat.write(tmp, this.dim, this.deleted);
    else this.graph!.writeIndexSync(tmp);
    renameSync(tmp, this.path);
    const meta: IndexMeta = {
      format: this.flat ? 2 : 1,
      layout: this.layout,
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
