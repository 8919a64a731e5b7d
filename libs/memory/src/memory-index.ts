import { Embedder } from './embedder';
import { IndexRebuild, rebuildIndexInWorker } from './index-rebuild';
import { MemoryStore } from './memory-store';
import { MemoryServiceOptions, logOf } from './memory-options';
import { DEFAULT_HNSW, FLAT_UP_TO, IndexFile, IndexSource, VectorIndex } from './vector-index';

/** /health's word while a worker builds the graph of a flat list that outgrew its layout */
export const OUTGREW_FLAT = `outgrew the flat layout (${FLAT_UP_TO} labels): the graph is built in a worker`;

/** An index file whose builds (a rebuild, the flat list's graph) run in a worker thread. */
export const buildsIndexInWorker = (
  o: MemoryServiceOptions,
): o is MemoryServiceOptions & { indexPath: string } => Boolean(o.indexPath && o.rebuildInBackground);

/** Where the vector index stands: `rebuilding` while a worker rebuilds its file (searches scan exactly meanwhile). */
export interface MemoryIndexStatus {
  index: 'ready' | 'rebuilding';
  /** why the file was rebuilt at open (missing, corrupt, another embedder...), null when it was used as it was */
  rebuilt_because: string | null;
}

/**
 * The vector index over the table's entries: opened from its file (or the table), rebuilt in a worker
 * thread when the file is unusable or its flat list outgrew its layout, and saved at most every
 * `saveIntervalMs`. While a worker builds it there is none (`current` is null) and searches scan exactly.
 */
export class MemoryIndex {
  private saveTimer: NodeJS.Timeout | null = null;
  /** the worker rebuilding the index file, while there is one (then `current` is null) */
  private rebuild: { job: IndexRebuild; ready: Promise<void> } | null = null;
  private rebuildReason: string | null = null;
  /** set by close: no index build starts and no built index is loaded from then on */
  private closing = false;

  constructor(
    private readonly o: MemoryServiceOptions,
    /** null while a worker rebuilds it: searches scan the table exactly meanwhile */
    private index: VectorIndex | null,
    /** runs `work` in turn with the passes that apply the log (see MemoryProjection.inTurn) */
    private readonly inTurn: (work: () => Promise<number>) => Promise<number>,
  ) {}

  /** The index, or null while a worker rebuilds it. */
  get current(): VectorIndex | null {
    return this.index;
  }

  /** why the index was rebuilt from the table at open, or null when its file was used */
  get rebuiltBecause(): string | null {
    return this.rebuildReason ?? this.index?.rebuiltBecause ?? null;
  }

  get status(): MemoryIndexStatus {
    return { index: this.index ? 'ready' : 'rebuilding', rebuilt_because: this.rebuiltBecause };
  }

  /** Resolves once the index is ready (at once when no rebuild runs). */
  async ready(): Promise<void> {
    await this.rebuild?.ready;
  }

  /**
   * The worker writes the file from a snapshot of the table; loading it then catches up with
   * what was written or deleted meanwhile (the table is the truth, and labels only grow). A
   * failed worker falls back to rebuilding here, on the event loop, as open would have.
   */
  rebuildInWorker(reason: string, { reportedOnceReady }: { reportedOnceReady: boolean }): void {
    if (this.closing) return;
    const path = this.o.indexPath!;
    const source = indexSource(this.o);
    const params = this.o.hnsw ?? DEFAULT_HNSW;
    const { model, dim } = this.o.embedder;
    const reportedBefore = this.rebuiltBecause;
    this.rebuildReason = reason;
    const job = rebuildIndexInWorker({ path, model, dim, params }, source);
    const ready = job.done
      .catch((err: unknown) => {
        if (this.rebuild?.job !== job) throw err;
        logOf(this.o)('memory index rebuild in a worker failed; rebuilding on the main thread', err);
        VectorIndex.removeFiles(path);
      })
      // in turn with sync: no entry is applied between the catch-up from the table and the swap
      .then(() =>
        this.inTurn(async () => {
          if (this.rebuild?.job !== job || this.closing) return 0;
          try {
            this.index = await VectorIndex.open(path, model, dim, source, params);
            if (!reportedOnceReady) this.rebuildReason = reportedBefore;
          } catch (err) {
            // no index then, and searches keep scanning exactly; the next add starts another build
            logOf(this.o)('memory index could not be loaded after its rebuild', err);
            throw err;
          } finally {
            this.rebuild = null;
          }
          return 0;
        }),
      )
      .then(() => undefined);
    // a cancelled rebuild (close, rebuildFromLog) is awaited by whoever cancelled it
    ready.catch(() => undefined);
    this.rebuild = { job, ready };
  }

  async cancelRebuild(): Promise<void> {
    const rebuild = this.rebuild;
    this.rebuild = null;
    await rebuild?.job.cancel();
  }

  /**
   * Adds to the index, but for the add that would turn its flat list into hnswlib's graph (15-35 ms
   * of inserts on the event loop): with an index file and background rebuilds, a worker builds the
   * graph from the table instead (whose rows this add's entry is among), while nearest() and searches
   * scan the live entries exactly. `rebuildingFromLog`: the table is being refilled, no build starts.
   */
  add(label: number, vector: Float32Array, deleted: boolean, rebuildingFromLog: boolean): void {
    const index = this.index;
    if (!index) {
      // a build whose index could not be loaded left none: the table has this entry, so a new build does
      if (!this.rebuild && buildsIndexInWorker(this.o) && !rebuildingFromLog)
        this.rebuildInWorker('its last rebuild could not be loaded', { reportedOnceReady: true });
      return;
    }
    if (index.outgrowsFlatWith(label) && buildsIndexInWorker(this.o)) {
      // reported while it runs (/health), not afterwards: the file was not rebuilt for being unusable
      this.rebuildInWorker(OUTGREW_FLAT, { reportedOnceReady: false });
      this.index = null;
      return;
    }
    index.add(label, vector, deleted);
  }

  /** Stops any rebuild and forgets why the file was rebuilt: the table is about to be refilled from the log. */
  async dropForRebuild(): Promise<void> {
    await this.cancelRebuild();
    this.rebuildReason = null;
  }

  /** Removes the file and starts the index again over the table (cleared: empty). */
  async startOver(): Promise<VectorIndex> {
    if (this.o.indexPath) VectorIndex.removeFiles(this.o.indexPath);
    const index = await openIndex(this.o);
    this.index = index;
    return index;
  }

  /**
   * Writes the index again from the table, in turn with the passes: its file keeps the vectors of
   * tombstoned entries, and an erased session's must leave it (the table holds erasedVector for them).
   */
  async rewrite(): Promise<void> {
    await this.inTurn(async () => {
      if (buildsIndexInWorker(this.o)) {
        await this.cancelRebuild();
        VectorIndex.removeFiles(this.o.indexPath);
        this.index = null;
        this.rebuildInWorker('an erased session left it', { reportedOnceReady: false });
      } else {
        await this.startOver();
        this.index?.saveIfDirty();
      }
      return 0;
    });
    await this.ready();
  }

  scheduleSave(): void {
    if (this.saveTimer) return;
    this.saveTimer = setTimeout(() => {
      this.saveTimer = null;
      try {
        this.index?.saveIfDirty();
      } catch (err) {
        // Never fatal: the next open catches up from the table or rebuilds.
        logOf(this.o)('memory index save failed', err);
      }
    }, this.o.saveIntervalMs ?? 2000);
    this.saveTimer.unref();
  }

  /** Persist the index now. */
  flush(): void {
    if (this.saveTimer) clearTimeout(this.saveTimer);
    this.saveTimer = null;
    this.index?.saveIfDirty();
  }

  /** From now on no build starts and no built index is loaded. */
  stopBuilding(): void {
    this.closing = true;
  }
}

/** Entries written by another embedder get vectors from this one, so the index holds one model. */
export async function reembedStale(store: MemoryStore, embedder: Embedder): Promise<void> {
  for await (const page of store.vectorPages()) {
    const stale = page.filter(
      (r) => r.embedding_model !== embedder.model || r.embedding_dim !== embedder.dim,
    );
    if (stale.length === 0) continue;
    const vectors = await embedder.embed(stale.map((r) => r.text));
    for (let i = 0; i < stale.length; i++)
      await store.replaceVector(stale[i].id, vectors[i], embedder.model, embedder.dim);
  }
}

export function indexSource(o: MemoryServiceOptions): IndexSource {
  return {
    pages: () => o.store.vectorPages(),
    deletedLabels: () => o.store.deletedLabels(),
    maxLabel: async () => (await o.store.stats()).max_label,
  };
}

/** `file`: the index file as open already looked at it, so it is not read and checksummed again. */
export async function openIndex(o: MemoryServiceOptions, file?: IndexFile): Promise<VectorIndex> {
  const source = indexSource(o);
  const params = o.hnsw ?? DEFAULT_HNSW;
  if (o.indexPath)
    return VectorIndex.open(o.indexPath, o.embedder.model, o.embedder.dim, source, params, file);
  const index = VectorIndex.create(o.embedder.model, o.embedder.dim, params);
  for await (const page of source.pages()) for (const v of page) index.add(v.label, v.vector, v.deleted);
  return index;
}
