import {
  EventPayload,
  MemoryKind,
  MemorySource,
  NewEvent,
  NotFoundError,
  RuntimeEvent,
  ValidationError,
  newId,
} from '@runledger/contracts';
import { EventStore } from '@runledger/event-store';
import { Embedder, cosine } from './embedder';
import { LiveEntries, MemorySearchHit, PendingWrites, matchesFilter, rankHits } from './live-entries';
import {
  MemoryFilter,
  MemoryRow,
  MemoryStore,
  StoredMemoryEntry,
  toEntry,
  vectorToBuffer,
} from './memory-store';
import {
  DEFAULT_MEMORY_POLICY,
  MemoryPolicyConfig,
  NearestEntry,
  dedupe,
  looksSecret,
} from './memory-write-policy';
import { IndexRebuild, rebuildIndexInWorker } from './index-rebuild';
import { DEFAULT_HNSW, FLAT_UP_TO, HnswParams, IndexFile, IndexSource, VectorIndex } from './vector-index';
import {
  HandedWritesFold,
  HeardWritesFold,
  UnappliedEntry,
  foldWrites,
  uncommitted,
} from './unapplied-writes';

/** /health's word while a worker builds the graph of a flat list that outgrew its layout */
const OUTGREW_FLAT = `outgrew the flat layout (${FLAT_UP_TO} labels): the graph is built in a worker`;

/** An index file whose builds (a rebuild, the flat list's graph) run in a worker thread. */
const buildsIndexInWorker = (o: MemoryServiceOptions): o is MemoryServiceOptions & { indexPath: string } =>
  Boolean(o.indexPath && o.rebuildInBackground);

/**
 * Memory writes with no task behind them (admin deletes, memory tool inserts)
 * go to this stream. It never holds TASK_RECEIVED, so it is not a task.
 */
export const MEMORY_SYSTEM_STREAM = 'system:memory';
const SYSTEM_SESSION = 'system';

/**
 * What a read sees of the log before it runs. `committed`: everything
 * committed before the call, read from the log. `heard`: what this process
 * heard committed (its own writes as they commit, another process's within
 * the store's poll of the file or with this process's next commit), with no
 * read of the log when nothing new was heard. For a task's deduplication and
 * recall: a write racing them from another process is missed either way.
 */
export type MemoryFreshness = 'committed' | 'heard';

export interface MemorySearchOptions extends MemoryFilter {
  k: number;
  /** default `committed` */
  freshness?: MemoryFreshness;
}

export type { MemorySearchHit } from './live-entries';

export interface MemoryServiceOptions {
  store: MemoryStore;
  events: EventStore;
  embedder: Embedder;
  /** the HNSW file; null keeps the index in memory only */
  indexPath: string | null;
  hnsw?: HnswParams;
  /** a filtered search over at most this many entries scans them exactly instead of asking the index */
  exactScanBelow?: number;
  /**
   * While there are at most `exactScanBelow` live entries, keep them with their vectors in memory
   * so an exact scan (search, nearest) reads no table (default true; false reads the table each time).
   */
  keepLiveEntries?: boolean;
  /**
   * a missing or stale index file is rebuilt in a worker thread while searches scan the stored
   * vectors exactly; otherwise open rebuilds it before it returns
   */
  rebuildInBackground?: boolean;
  /** the index file is written at most this often (and on close); a crash loses nothing, open catches up from the table */
  saveIntervalMs?: number;
  log?: (message: string, err?: unknown) => void;
}

const defaultLog = (message: string, err?: unknown) =>
  process.stderr.write(
    `runledger: ${message}${err ? `: ${err instanceof Error ? err.message : String(err)}` : ''}\n`,
  );

export interface DirectWrite {
  text: string;
  kind: MemoryKind;
  source: MemorySource;
  weight: number;
  reason: string;
  /** the task (and call) on whose behalf the entry is written, if any */
  task_id?: string | null;
  session_id?: string | null;
  metadata?: Record<string, unknown>;
}

const CACHE_SIZE = 256;
const DEFAULT_EXACT_SCAN_BELOW = 2000;
/** entries a `heard` search overlays on the live ones rather than wait for the pass that applies them */
const OVERLAY_AT_MOST = 128;
/** heard writes nearest() takes without waiting for their pass; past that (passes failing), it waits */
const HEARD_OVERLAY_LIMIT = 1000;
/**
 * longest a decided write stays listed for its task's writer to take it (see decideWrite): the writer
 * stages it once the step's later outcome hooks are done, which may call a model (a model critic)
 */
const DECIDED_LISTED_MS = 30_000;
/** MEMORY_WRITTEN events read from the log per statement while syncing */
const SYNC_PAGE = 500;
/** a pass's entries applied at once: one commit for a burst's writes, without hundreds of embedder calls at a time */
const APPLY_AT_ONCE = 16;

/** A write decideWrite decided: a MEMORY_WRITTEN with its id, appended to the task's stream as it is. */
export type DecidedWrite = NewEvent & {
  type: 'MEMORY_WRITTEN';
  event_id: string;
  payload: EventPayload<'MEMORY_WRITTEN'>;
};

/** Where the vector index stands: `rebuilding` while a worker rebuilds its file (searches scan exactly meanwhile). */
export interface MemoryIndexStatus {
  index: 'ready' | 'rebuilding';
  /** why the file was rebuilt at open (missing, corrupt, another embedder...), null when it was used as it was */
  rebuilt_because: string | null;
}

/**
 * Memory as a projection of MEMORY_WRITTEN events. A write is appended to the
 * log first and applied to the table and index by `sync`, which reads the log
 * from the projection's checkpoint; every read syncs first, so what a task's
 * hook wrote is visible to the next task, and `rebuildFromLog` is the same code
 * run from position 0.
 */
export class MemoryService {
  private syncing: Promise<number> = Promise.resolve(0);
  /** the pass queued behind the running one, not started yet */
  private waitingPass: Promise<number> | null = null;
  /** a caller of the waiting pass asked for `committed`: it reads the log */
  private waitingPassReads = false;
  /**
   * The log position this instance's index has applied. Its own, not the
   * table's checkpoint: instances sharing a PostgreSQL database share the
   * table, but each keeps its own index in step from the log.
   */
  private indexedThrough: number;
  private readonly cache = new Map<string, Float32Array>();
  /**
   * An inserting write heard and not applied yet, as a `heard` search overlays it (its label and
   * weight aside): built once per event, kept while the event is in `heardWrites`
   */
  private readonly overlaid = new WeakMap<RuntimeEvent, { entry: StoredMemoryEntry; vector: Float32Array }>();
  private overlayBuild: Promise<void> | null = null;
  private saveTimer: NodeJS.Timeout | null = null;
  /** the worker rebuilding the index file, while there is one (then `index` is null) */
  private rebuild: { job: IndexRebuild; ready: Promise<void> } | null = null;
  private rebuildReason: string | null = null;
  /**
   * What the event store has published to this instance's commit listener: every event from
   * `first` through `through` (adapters publish in position order without a gap, other instances'
   * commits included once they learn of them), and the newest MEMORY_WRITTEN among them.
   */
  private readonly heard = { first: 0, through: 0, newestMemory: 0 };
  /** the MEMORY_WRITTEN events heard and not applied yet (position order): what nearest() adds to the index */
  private heardWrites: RuntimeEvent[] = [];
  /** `heardWrites` past `indexedThrough`, folded: every deduplication and heard search reads it */
  private readonly heardFold = new HeardWritesFold();
  /** the heard fold with the writes other writers handed to the store on top: what deduplication reads */
  private readonly handedFold = new HandedWritesFold();
  /** decideWrite's decisions, one after the other */
  private decisions: Promise<unknown> = Promise.resolve();
  /** the listings of decideWrite's writes, until their time is up: a closing service lets them go */
  private readonly decidedListings = new Map<NodeJS.Timeout, () => void>();
  /** the vector of each inserting write not applied yet that a deduplication compared with, kept while the write is */
  private readonly unappliedVectors = new WeakMap<RuntimeEvent, Float32Array>();
  /** the live entries are being refilled from the log: only a pass's end says what they hold */
  private rebuildingFromLog = false;
  /** set by close: no index build starts and no built index is loaded from then on */
  private closing = false;
  /** the position of the last heard write left out of `heardWrites` (full): nearest() applies through it first */
  private overlayDroppedThrough = 0;
  /** the last pass's write of the projection position, which no pass waits for */
  private positionSaved: Promise<void> = Promise.resolve();
  private readonly stopListening: () => void;

  private constructor(
    private readonly o: MemoryServiceOptions,
    /** null while a worker rebuilds it: searches scan the table exactly meanwhile */
    private index: VectorIndex | null,
    indexedThrough: number,
    /** the live entries while there are few enough to scan exactly; null above that (or when not kept) */
    private live: LiveEntries | null,
  ) {
    this.indexedThrough = indexedThrough;
    this.stopListening = o.events.onCommitted((events) => this.hear(events));
  }

  static async open(o: MemoryServiceOptions): Promise<MemoryService> {
    await MemoryService.reembedStale(o.store, o.embedder);
    const source = MemoryService.indexSource(o);
    // an empty table has nothing to rebuild: open writes its empty index at once
    const file =
      buildsIndexInWorker(o) && (await o.store.stats()).rows > 0
        ? await VectorIndex.inspect(o.indexPath, o.embedder.model, o.embedder.dim, source)
        : null;
    // a file to rebuild goes to the worker, and so does a flat file the table outgrew (a close during its conversion)
    const workerBuild = !file
      ? null
      : file.unusable !== null
        ? { reason: file.unusable, reportedOnceReady: true }
        : VectorIndex.outgrowsFlat(file)
          ? { reason: OUTGREW_FLAT, reportedOnceReady: false }
          : null;
    // read before the index is built from the table: the table holds every entry up to it,
    // and whatever another instance applies meanwhile is applied again here (idempotent)
    const indexedThrough = await o.store.checkpoint();
    const svc = new MemoryService(
      o,
      workerBuild ? null : await MemoryService.openIndex(o, file ?? undefined),
      indexedThrough,
      await MemoryService.loadLive(o),
    );
    if (workerBuild) svc.rebuildInWorker(workerBuild.reason, workerBuild);
    await svc.sync();
    return svc;
  }

  private static exactScanLimit(o: MemoryServiceOptions): number {
    return o.exactScanBelow ?? DEFAULT_EXACT_SCAN_BELOW;
  }

  /** The table's live entries in memory, or null when there are more than an exact scan takes (or none are kept). */
  private static async loadLive(o: MemoryServiceOptions): Promise<LiveEntries | null> {
    if (o.keepLiveEntries === false) return null;
    const limit = MemoryService.exactScanLimit(o);
    const rows = await o.store.withVectors({}, limit + 1);
    if (rows.length > limit) return null;
    const live = new LiveEntries(limit);
    for (const { entry, vector } of rows) live.put(entry, vector);
    return live;
  }

  /** Keeps a live entry in memory; past the exact-scan limit the copy is dropped and searches read the table. */
  private keepLive(entry: StoredMemoryEntry, vector: Float32Array): void {
    if (this.live && !this.live.put(entry, vector)) this.live = null;
  }

  /**
   * A MEMORY_WRITTEN heard is applied at once, in the background: nearest()
   * does not wait for it (it takes what was heard and not applied yet from
   * `heardWrites`), and the writes of the pass share the next commit with
   * whatever follows.
   */
  private hear(events: readonly RuntimeEvent[]): void {
    if (this.heard.first === 0) this.heard.first = events[0].position;
    let wrote = false;
    for (const e of events)
      if (e.type === 'MEMORY_WRITTEN') {
        this.heard.newestMemory = Math.max(this.heard.newestMemory, e.position);
        if (this.heardWrites.length < HEARD_OVERLAY_LIMIT) this.heardWrites.push(e);
        else this.overlayDroppedThrough = e.position;
        wrote = true;
      }
    this.heard.through = Math.max(this.heard.through, events[events.length - 1].position);
    if (wrote)
      this.sync('heard').catch((err: unknown) =>
        (this.o.log ?? defaultLog)('memory: applying what was heard failed; the next read applies it', err),
      );
  }

  /** Everything committed after what was applied reached the commit listener: nothing from before it listened. */
  private get heardSinceApplied(): boolean {
    return this.heard.first > 0 && this.indexedThrough >= this.heard.first - 1;
  }

  /** Whatever is committed and not applied is in `heardWrites`: heard, and none left out of a full list. */
  private get heardWritesHoldUnapplied(): boolean {
    return this.heardSinceApplied && this.indexedThrough >= this.overlayDroppedThrough;
  }

  get embeddingModel(): string {
    return this.o.embedder.model;
  }

  get embeddingDim(): number {
    return this.o.embedder.dim;
  }

  /** why the index was rebuilt from the table at open, or null when its file was used */
  get indexRebuiltBecause(): string | null {
    return this.rebuildReason ?? this.index?.rebuiltBecause ?? null;
  }

  get indexStatus(): MemoryIndexStatus {
    return { index: this.index ? 'ready' : 'rebuilding', rebuilt_because: this.indexRebuiltBecause };
  }

  /** Resolves once the index is ready (at once when no rebuild runs). */
  async indexReady(): Promise<void> {
    await this.rebuild?.ready;
  }

  /**
   * The worker writes the file from a snapshot of the table; loading it then catches up with
   * what was written or deleted meanwhile (the table is the truth, and labels only grow). A
   * failed worker falls back to rebuilding here, on the event loop, as open would have.
   */
  private rebuildInWorker(reason: string, { reportedOnceReady }: { reportedOnceReady: boolean }): void {
    if (this.closing) return;
    const path = this.o.indexPath!;
    const source = MemoryService.indexSource(this.o);
    const params = this.o.hnsw ?? DEFAULT_HNSW;
    const { model, dim } = this.o.embedder;
    const reportedBefore = this.indexRebuiltBecause;
    this.rebuildReason = reason;
    const job = rebuildIndexInWorker({ path, model, dim, params }, source);
    const ready = job.done
      .catch((err: unknown) => {
        if (this.rebuild?.job !== job) throw err;
        (this.o.log ?? defaultLog)(
          'memory index rebuild in a worker failed; rebuilding on the main thread',
          err,
        );
        VectorIndex.removeFiles(path);
      })
      // in turn with sync: no entry is applied between the catch-up from the table and the swap
      .then(() => {
        this.syncing = this.syncing
          .catch(() => 0)
          .then(async () => {
            if (this.rebuild?.job !== job || this.closing) return 0;
            try {
              this.index = await VectorIndex.open(path, model, dim, source, params);
              if (!reportedOnceReady) this.rebuildReason = reportedBefore;
            } catch (err) {
              // no index then, and searches keep scanning exactly; the next add starts another build
              (this.o.log ?? defaultLog)('memory index could not be loaded after its rebuild', err);
              throw err;
            } finally {
              this.rebuild = null;
            }
            return 0;
          });
        return this.syncing;
      })
      .then(() => undefined);
    // a cancelled rebuild (close, rebuildFromLog) is awaited by whoever cancelled it
    ready.catch(() => undefined);
    this.rebuild = { job, ready };
  }

  private async cancelRebuild(): Promise<void> {
    const rebuild = this.rebuild;
    this.rebuild = null;
    await rebuild?.job.cancel();
  }

  /** Entries written by another embedder get vectors from this one, so the index holds one model. */
  private static async reembedStale(store: MemoryStore, embedder: Embedder): Promise<void> {
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

  private static indexSource(o: MemoryServiceOptions): IndexSource {
    return {
      pages: () => o.store.vectorPages(),
      deletedLabels: () => o.store.deletedLabels(),
      maxLabel: async () => (await o.store.stats()).max_label,
    };
  }

  /** `file`: the index file as open already looked at it, so it is not read and checksummed again. */
  private static async openIndex(o: MemoryServiceOptions, file?: IndexFile): Promise<VectorIndex> {
    const source = MemoryService.indexSource(o);
    const params = o.hnsw ?? DEFAULT_HNSW;
    if (o.indexPath)
      return VectorIndex.open(o.indexPath, o.embedder.model, o.embedder.dim, source, params, file);
    const index = VectorIndex.create(o.embedder.model, o.embedder.dim, params);
    for await (const page of source.pages()) for (const v of page) index.add(v.label, v.vector, v.deleted);
    return index;
  }

  async embed(text: string): Promise<Float32Array> {
    const hit = this.cache.get(text);
    if (hit) return hit;
    const [v] = await this.o.embedder.embed([text]);
    this.cacheVector(text, v);
    return v;
  }

  /** The vectors of `texts`, in order: cached ones as they are, the others from one embedder call. */
  private async embedAll(texts: readonly string[]): Promise<Float32Array[]> {
    const known = new Map<string, Float32Array>();
    for (const t of texts) {
      const hit = this.cache.get(t);
      if (hit) known.set(t, hit);
    }
    const missing = [...new Set(texts.filter((t) => !known.has(t)))];
    if (missing.length > 0) {
      const fresh = await this.o.embedder.embed(missing);
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

  /**
   * Apply every MEMORY_WRITTEN after the checkpoint (`freshness`: what it
   * must see). Serialised: callers arriving while a pass waits for the
   * running one share the waiting pass, which starts after all of them
   * called, so each still sees everything committed before its call.
   */
  sync(freshness: MemoryFreshness = 'committed'): Promise<number> {
    if (freshness === 'committed') this.waitingPassReads = true;
    if (this.waitingPass) return this.waitingPass;
    const pass = this.syncing
      .catch(() => 0)
      .then(() => {
        this.waitingPass = null;
        const readsUnheard = this.waitingPassReads;
        this.waitingPassReads = false;
        return this.applyPending(readsUnheard);
      });
    this.waitingPass = pass;
    this.syncing = pass;
    return pass;
  }

  /**
   * Reads the log from where the applied MEMORY_WRITTEN events end. When every
   * event committed since then reached the commit listener and none of them is
   * a MEMORY_WRITTEN, only what was committed and not heard yet (another
   * instance's commit the store has not published here) can hold a new one, so
   * the read starts after what was heard: one short statement that finds
   * nothing when nothing new was written. Without `readsUnheard`, there is
   * then nothing to read.
   */
  private async applyPending(readsUnheard: boolean): Promise<number> {
    const heard = this.heard.through;
    const nothingNewHeard = this.heardSinceApplied && this.heard.newestMemory <= this.indexedThrough;
    if (nothingNewHeard && !readsUnheard) {
      this.indexedThrough = Math.max(this.indexedThrough, heard);
      this.heardWrites = [];
      return 0;
    }
    let after = nothingNewHeard ? Math.max(this.indexedThrough, heard) : this.indexedThrough;
    let applied = 0;
    for (;;) {
      const page = await this.o.events.readAll({
        after_position: after,
        types: ['MEMORY_WRITTEN'],
        limit: SYNC_PAGE,
      });
      await this.applyPage(page);
      if (page.length > 0) after = this.indexedThrough = page[page.length - 1].position;
      applied += page.length;
      if (page.length < SYNC_PAGE) break;
    }
    // the pass read past every event heard before it began: none of them is left to apply
    this.indexedThrough = Math.max(this.indexedThrough, heard);
    this.heardWrites = this.heardWrites.filter((e) => e.position > this.indexedThrough);
    if (applied > 0) {
      // Once per pass, and not waited for: a crash before it lands only applies the pass again, which
      // changes nothing (see apply). With a SQLite writer thread it rides in the next commit (lazyDb).
      this.positionSaved = this.o.store.setCheckpoint(after).catch((err: unknown) => {
        (this.o.log ?? defaultLog)('memory projection position not saved', err);
      });
      this.scheduleSave();
    }
    return applied;
  }

  /**
   * Applies a page's events in steps of up to APPLY_AT_ONCE events of distinct
   * entries, without waiting for one entry's write before the next entry's:
   * with a SQLite writer thread, the writes of a step then share one commit
   * instead of a round trip each. A step reads its entries' rows in one
   * statement before it starts; an entry's next event waits for the next step,
   * so it reads the row as the earlier event left it. One event a step where
   * writes may land out of the order they were issued in (PostgreSQL), which
   * would give labels out of order: the index file's catch-up adds only labels
   * above the highest it holds. A failure fails the page, which the next pass
   * applies again (apply is idempotent); every apply of a failed step has ended
   * first, so the next pass never overlaps one.
   */
  private async applyPage(page: readonly RuntimeEvent[]): Promise<void> {
    const atOnce = this.o.store.writesInIssueOrder ? APPLY_AT_ONCE : 1;
    const writes = page.filter((e) => e.type === 'MEMORY_WRITTEN');
    for (let i = 0; i < writes.length;) {
      const step: typeof writes = [];
      const ids = new Set<string>();
      while (i < writes.length && step.length < atOnce && !ids.has(writes[i].payload.entry_id)) {
        ids.add(writes[i].payload.entry_id);
        step.push(writes[i++]);
      }
      const stored = await this.o.store.byIds([...ids]);
      const applied = await Promise.allSettled(
        step.map((e) => this.apply(e, stored.get(e.payload.entry_id) ?? null)),
      );
      const failed = applied.find((r) => r.status === 'rejected');
      if (failed) throw failed.reason;
    }
  }

  /**
   * Idempotent, one statement per step, no transaction: replaying an event
   * after a crash between the entry write and the checkpoint changes nothing,
   * and neither does applying one another instance already wrote to the
   * table (only this instance's index and live entries learn of it).
   * `stored`: the entry's row as its step read it (null: not stored).
   */
  private async apply(
    e: Extract<RuntimeEvent, { type: 'MEMORY_WRITTEN' }>,
    stored: StoredMemoryEntry | null,
  ): Promise<void> {
    const p = e.payload;
    let existing = stored;
    // a reinforce of an entry no write stored (the insert it saw was on its way to the log in another
    // task that then failed, or commits after it) stores the entry as the reinforce saw it
    if ((p.op === 'insert' || p.op === 'reinforce') && !existing) {
      const vector = await this.embed(p.text);
      const row = this.rowOf(e, vector);
      const label = await this.o.store.insertIfAbsent(row);
      if (label !== null) {
        this.addToIndex(label, vector);
        this.keepLive(toEntry({ ...row, label }), vector);
        return;
      }
      // another instance inserted it between the read and the insert
      existing = await this.o.store.get(p.entry_id);
      if (!existing) throw new Error(`memory entry ${p.entry_id} was neither inserted nor found`);
    }
    if (p.op === 'insert' && existing) {
      await this.learnStored(existing);
    } else if (p.op === 'reinforce' && existing && !existing.deleted) {
      await this.o.store.setWeight(p.entry_id, p.weight, e.created_at);
      this.live?.setWeight(p.entry_id, p.weight, e.created_at);
    } else if (p.op === 'delete' && existing) {
      if (!existing.deleted) await this.o.store.tombstone(p.entry_id, e.created_at);
      this.index?.remove(existing.label);
      this.live?.remove(existing.id);
    }
  }

  /** The table row an inserting MEMORY_WRITTEN gives its entry, less the label the insert assigns. */
  private rowOf(
    e: Extract<RuntimeEvent, { type: 'MEMORY_WRITTEN' }>,
    vector: Float32Array,
  ): Omit<MemoryRow, 'label'> {
    const p = e.payload;
    const system = e.task_id === MEMORY_SYSTEM_STREAM;
    const meta = p.metadata as { task_id?: unknown; session_id?: unknown };
    return {
      id: p.entry_id,
      text: p.text,
      kind: p.kind,
      source: p.source,
      weight: p.weight,
      task_id: system ? (typeof meta.task_id === 'string' ? meta.task_id : null) : e.task_id,
      session_id: system ? (typeof meta.session_id === 'string' ? meta.session_id : null) : e.session_id,
      metadata: JSON.stringify(p.metadata),
      embedding_model: this.o.embedder.model,
      embedding_dim: this.o.embedder.dim,
      vector: vectorToBuffer(vector),
      deleted: 0,
      written_by: e.event_id,
      created_at: e.created_at,
      updated_at: e.created_at,
    };
  }

  /** An entry already in the table (applied before a crash, or by another instance): the index and live entries learn it. */
  private async learnStored(entry: StoredMemoryEntry): Promise<void> {
    // while a worker rebuilds the index there is none to add to: the rebuilt file is caught up from the table
    const toIndex = this.index !== null && !this.index.has(entry.label);
    const toLive = this.live !== null && !entry.deleted && !this.live.has(entry.id);
    if (!toIndex && !toLive) return;
    const vector = await this.o.store.vector(entry.id);
    if (!vector) return;
    if (toIndex) this.addToIndex(entry.label, vector, entry.deleted);
    if (toLive) this.keepLive(entry, vector);
  }

  /**
   * Adds to the index, but for the add that would turn its flat list into hnswlib's graph (15-35 ms
   * of inserts on the event loop): with an index file and background rebuilds, a worker builds the
   * graph from the table instead (whose rows this add's entry is among), while nearest() and searches
   * scan the live entries exactly.
   */
  private addToIndex(label: number, vector: Float32Array, deleted = false): void {
    const index = this.index;
    if (!index) {
      // a build whose index could not be loaded left none: the table has this entry, so a new build does
      if (!this.rebuild && buildsIndexInWorker(this.o) && !this.rebuildingFromLog)
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

  private scheduleSave(): void {
    if (this.saveTimer) return;
    this.saveTimer = setTimeout(() => {
      this.saveTimer = null;
      try {
        this.index?.saveIfDirty();
      } catch (err) {
        // Never fatal: the next open catches up from the table or rebuilds.
        (this.o.log ?? defaultLog)('memory index save failed', err);
      }
    }, this.o.saveIntervalMs ?? 2000);
    this.saveTimer.unref();
  }

  async get(id: string): Promise<StoredMemoryEntry | null> {
    await this.sync();
    return this.o.store.get(id);
  }

  async list(filter: MemoryFilter, limit: number): Promise<StoredMemoryEntry[]> {
    await this.sync();
    return this.o.store.list(filter, limit);
  }

  /** Entries ranked by similarity x weight, filters applied. */
  async search(query: string, options: MemorySearchOptions): Promise<MemorySearchHit[]> {
    const filter: MemoryFilter = {
      kind: options.kind,
      session_id: options.session_id,
      task_id: options.task_id,
      min_weight: options.min_weight,
    };
    const k = Math.max(0, options.k);
    if (options.freshness === 'heard' && k > 0) {
      const overHeard = await this.searchOverHeard(query, filter, k);
      if (overHeard) return overHeard;
    }
    await this.sync(options.freshness);
    if (k === 0 || this.live?.size === 0 || this.index?.size === 0) return [];
    const q = await this.embed(query);
    // read after the embedding: an entry applied meanwhile is in the copy, and a dropped copy is not used
    if (this.live) return this.live.search(q, filter, k);
    const index = this.index;
    const filtered = Object.values(filter).some((v) => v !== undefined);
    const limit = MemoryService.exactScanLimit(this.o);
    const pool = filtered || !index ? await this.o.store.countActive(filter) : index.size;
    if (pool <= limit || !index) return this.exactSearch(q, filter, k, pool);

    // Over-fetch from the index, then filter and re-rank; widen until k survive or the index is exhausted.
    let fetch = Math.max(k * 10, 100);
    for (;;) {
      const hits = index.search(q, fetch);
      const rows = await this.o.store.byLabels(hits.map((h) => h.label));
      const ranked = hits
        .map((h) => ({ entry: rows.get(h.label), similarity: h.similarity }))
        .filter(
          (h): h is { entry: StoredMemoryEntry; similarity: number } =>
            h.entry !== undefined && !h.entry.deleted && matchesFilter(h.entry, filter),
        )
        .map((h) => ({ ...h, score: h.similarity * h.entry.weight }));
      if (ranked.length >= k || fetch >= index.size) return rankHits(ranked, k);
      fetch *= 4;
    }
  }

  /**
   * A `heard` search over the live entries as the heard writes not applied
   * yet leave them, without waiting for those writes to be applied (which
   * waits for their table writes to commit); null where that cannot be
   * answered from memory (no live entries kept, not every unapplied write
   * was heard, or more than OVERLAY_AT_MOST of them insert), and the caller
   * applies first.
   */
  private async searchOverHeard(
    query: string,
    filter: MemoryFilter,
    k: number,
  ): Promise<MemorySearchHit[] | null> {
    const q = await this.embed(query);
    // the overlaid entries first; the overlay is then built and searched in one go, on one state of what is applied
    for (let attempt = 0; attempt < 3; attempt++) {
      if (!this.live || !this.heardWritesHoldUnapplied || this.rebuildingFromLog) return null;
      const unapplied = [...this.unappliedHeard().values()];
      const inserts = unapplied.filter((u) => u.insertedBy && !u.deleted && !this.live!.has(u.entry_id));
      // a backlog the pass is better left to apply: overlaid, it would cost every search and every
      // deduplication (nearest) more than the pass costs once (measured: no faster, more main-thread time)
      if (inserts.length > OVERLAY_AT_MOST) return null;
      const unbuilt = inserts.filter((u) => !this.overlaid.has(u.insertedBy!));
      if (unbuilt.length > 0) {
        try {
          await this.buildOverlaid(unbuilt);
        } catch {
          // an embedder that fails here fails this way out only: the caller applies the writes instead
          return null;
        }
        continue;
      }
      const pending = this.pendingWrites(unapplied);
      if (pending) return this.live.search(q, filter, k, pending);
    }
    return null;
  }

  /**
   * The overlaid entries of inserting writes not applied yet, their vectors from one embedder call.
   * Searches arriving together share one build: the first builds, the others wait for it and look again.
   */
  private buildOverlaid(writes: readonly UnappliedEntry[]): Promise<void> {
    this.overlayBuild ??= this.embedAll(writes.map((u) => u.text))
      .then((vectors) =>
        writes.forEach((u, i) => {
          const row = { ...this.rowOf(u.insertedBy!, vectors[i]), label: 0 };
          this.overlaid.set(u.insertedBy!, { entry: toEntry(row), vector: vectors[i] });
        }),
      )
      .finally(() => (this.overlayBuild = null));
    return this.overlayBuild;
  }

  /**
   * What the unapplied writes make of the live entries, as apply will leave them (entries it inserts
   * labelled after every applied one, in order); null when an inserted entry is not built yet (buildOverlaid).
   */
  private pendingWrites(unapplied: readonly UnappliedEntry[]): PendingWrites | null {
    const live = this.live!;
    const inserted: PendingWrites['inserted'][number][] = [];
    const weights = new Map<string, number>();
    const deleted = new Set<string>();
    let provisionalLabel = Number.MAX_SAFE_INTEGER - unapplied.length;
    for (const u of unapplied) {
      if (u.deleted) deleted.add(u.entry_id);
      else if (!u.insertedBy || live.has(u.entry_id)) weights.set(u.entry_id, u.weight);
      else {
        const built = this.overlaid.get(u.insertedBy);
        if (!built) return null;
        inserted.push({
          entry: { ...built.entry, weight: u.weight, label: provisionalLabel++ },
          vector: built.vector,
        });
      }
    }
    return { inserted, weights, deleted };
  }

  private async exactSearch(
    q: Float32Array,
    filter: MemoryFilter,
    k: number,
    pool: number,
  ): Promise<MemorySearchHit[]> {
    const rows = await this.o.store.withVectors(filter, pool);
    return rankHits(
      rows.map(({ entry, vector }) => {
        const similarity = cosine(q, vector);
        return { entry, similarity, score: similarity * entry.weight };
      }),
      k,
    );
  }

  /**
   * The closest live entry to a vector, for deduplication. `taskEvents` (a
   * task's log as its writer folded it) adds the task's writes memory has not
   * applied yet (handed over and not committed, or committed since the last
   * pass): the entries it inserted, and the weights or deletions it gave
   * stored ones, so a task's writes see its own earlier ones. Sees what was
   * `heard` (see MemoryFreshness), without waiting for it to be applied: what
   * was heard and not applied yet is taken from the heard events themselves.
   * Sees too what other writers in this process handed to the store and is
   * not committed yet (EventStore.handOver): a task started while another's
   * last events commit finds that task's writes rather than storing copies.
   */
  async nearest(
    vector: Float32Array,
    kind: MemoryKind,
    taskEvents: readonly RuntimeEvent[] = [],
  ): Promise<NearestEntry | null> {
    // what the heard writes do not hold (committed before this instance began to hear, or left out) is applied first
    if (!this.heardWritesHoldUnapplied) await this.sync('heard');
    const handed = this.handedFold.of(this.unappliedHeard(), this.o.events.handedOver());
    // the task's writes its writer listed are in the handed fold already, in the order they were decided; one
    // whose commit was heard a moment before its writer folded the commit is in the heard fold
    const own = uncommitted(taskEvents).filter(
      (e) =>
        e.type !== 'MEMORY_WRITTEN' ||
        !(this.handedFold.lists(e.event_id) || this.heardFold.holds(e.event_id)),
    );
    const unapplied = foldWrites(handed, own);
    const deleted = new Set<string>();
    for (const u of unapplied.values()) if (u.deleted) deleted.add(u.entry_id);
    let best = await this.nearestStored(vector, kind, deleted);
    const reweighed = best && unapplied.get(best.entry_id);
    if (best && reweighed) best = { ...best, weight: reweighed.weight };
    const inserts = [...unapplied.values()].filter((u) => u.insertedBy && !u.deleted && u.kind === kind);
    // the overlaid entries' vectors, then one embedder call at most for the rest: a wave of tasks may
    // find hundreds of heard writes not applied yet
    const vectorOf = (u: UnappliedEntry) =>
      this.overlaid.get(u.insertedBy!)?.vector ?? this.unappliedVectors.get(u.insertedBy!);
    const unbuilt = inserts.filter((u) => !vectorOf(u));
    const embedded = await this.embedAll(unbuilt.map((u) => u.text));
    unbuilt.forEach((u, i) => this.unappliedVectors.set(u.insertedBy!, embedded[i]));
    const vectors = inserts.map((u) => vectorOf(u)!);
    inserts.forEach((u, i) => {
      const similarity = cosine(vector, vectors[i]);
      if (!best || similarity > best.similarity)
        best = { entry_id: u.entry_id, kind: u.kind, text: u.text, weight: u.weight, similarity };
    });
    return best;
  }

  /**
   * nearest() and `decide`'s write on what it found, one decision at a time in this process. The write
   * (a MEMORY_WRITTEN with its event_id, to append to the task's stream as it is) is handed over in the
   * store (EventStore.handOver) before the next decision looks, so tasks deciding side by side find each
   * other's writes rather than each storing a copy. The task's writer lists the write again under the
   * same id when it stages it, and answers for it from then on; a write no writer takes leaves the list
   * after DECIDED_LISTED_MS. `vector` is the candidate's text embedded; `taskEvents` as nearest() takes them.
   */
  decideWrite(
    vector: Float32Array,
    kind: MemoryKind,
    taskEvents: readonly RuntimeEvent[],
    decide: (nearest: NearestEntry | null) => DecidedWrite | null,
  ): Promise<DecidedWrite | null> {
    const decided = this.decisions.then(async () => {
      const write = decide(await this.nearest(vector, kind, taskEvents));
      if (write) this.listDecided(write, taskEvents[0]);
      return write;
    });
    this.decisions = decided.catch(() => undefined);
    return decided;
  }

  private listDecided(write: DecidedWrite, first: RuntimeEvent | undefined): void {
    const event = {
      ...write,
      task_id: first?.task_id ?? '',
      session_id: first?.session_id ?? '',
      sequence: 0,
      position: 0,
      correlation_id: first?.correlation_id ?? write.event_id,
      created_at: new Date().toISOString(),
    } as RuntimeEvent;
    const release = this.o.events.handOver([event]);
    const timer = setTimeout(() => {
      this.decidedListings.delete(timer);
      release();
    }, DECIDED_LISTED_MS).unref();
    this.decidedListings.set(timer, release);
  }

  private unappliedHeard(): ReadonlyMap<string, UnappliedEntry> {
    return this.heardFold.of(this.heardWrites, this.indexedThrough);
  }

  /** The closest entry applied to the index (or the table), leaving out `deleted`. */
  private async nearestStored(
    vector: Float32Array,
    kind: MemoryKind,
    deleted: ReadonlySet<string>,
  ): Promise<NearestEntry | null> {
    if (!this.index)
      return this.live ? this.live.nearest(vector, kind, deleted) : this.nearestByScan(vector, kind, deleted);
    // so few are scanned exactly either way (a flat index, see FLAT_UP_TO), and the live entries' scan skips other kinds
    if (this.live && this.live.size <= FLAT_UP_TO) return this.live.nearest(vector, kind, deleted);
    const hits = this.index.search(vector, 10);
    const labels = hits.map((h) => h.label);
    // below the exact-scan limit the live entries are in memory: no table to read
    const rows = this.live ? this.live.byLabels(labels) : await this.o.store.byLabels(labels);
    for (const h of hits) {
      const entry = rows.get(h.label);
      if (entry && !entry.deleted && entry.kind === kind && !deleted.has(entry.id))
        return {
          entry_id: entry.id,
          kind: entry.kind,
          text: entry.text,
          weight: entry.weight,
          similarity: h.similarity,
        };
    }
    return null;
  }

  /** nearest() while the index is rebuilt: every live entry of the kind, compared exactly. */
  private async nearestByScan(
    vector: Float32Array,
    kind: MemoryKind,
    deleted: ReadonlySet<string>,
  ): Promise<NearestEntry | null> {
    const rows = await this.o.store.withVectors({ kind }, await this.o.store.countActive({ kind }));
    const scanned = new LiveEntries(rows.length);
    for (const { entry, vector: stored } of rows) scanned.put(entry, stored);
    return scanned.nearest(vector, kind, deleted);
  }

  /** A MEMORY_WRITTEN payload for a new entry (the id is chosen here, so the writer can return it). */
  insertPayload(w: DirectWrite, sourceEventId: string | null): EventPayload<'MEMORY_WRITTEN'> {
    return {
      op: 'insert',
      entry_id: newId('mem'),
      kind: w.kind,
      text: w.text,
      weight: w.weight,
      previous_weight: null,
      source: w.source,
      source_event_id: sourceEventId,
      reason: w.reason,
      embedding_model: this.o.embedder.model,
      embedding_dim: this.o.embedder.dim,
      metadata: {
        ...w.metadata,
        ...(w.task_id ? { task_id: w.task_id } : {}),
        ...(w.session_id ? { session_id: w.session_id } : {}),
      },
    };
  }

  /** Write with no task stream to append to (memory tools, admin): the system stream, then apply. */
  async insert(w: DirectWrite): Promise<StoredMemoryEntry> {
    const payload = this.insertPayload(w, null);
    await this.appendSystem([{ type: 'MEMORY_WRITTEN', payload }]);
    const entry = await this.o.store.get(payload.entry_id);
    if (!entry) throw new Error(`memory entry ${payload.entry_id} was written but not applied`);
    return entry;
  }

  /**
   * A direct write under the same rules as the outcome hook: never a secret,
   * and a near-duplicate of a live entry of the same kind raises its weight
   * instead of storing a copy. Returns the entry written or reinforced.
   */
  async remember(
    w: DirectWrite,
    policy: MemoryPolicyConfig = DEFAULT_MEMORY_POLICY,
  ): Promise<{ op: 'insert' | 'reinforce' | 'none'; entry: StoredMemoryEntry }> {
    if (looksSecret(w.text)) throw new ValidationError('the text looks like it holds a secret; not stored');
    // an API write: it sees everything committed, applied, so the entry it finds is in the table
    await this.sync();
    const nearest = await this.nearestStored(await this.embed(w.text), w.kind, new Set());
    const decision = dedupe(
      { op: 'insert', kind: w.kind, source: w.source, weight: w.weight, text: w.text, reason: w.reason },
      nearest,
      policy,
    );
    if (decision.op === 'insert') return { op: 'insert', entry: await this.insert(w) };
    const existing = (await this.o.store.get(nearest!.entry_id))!;
    if (decision.op === 'none') return { op: 'none', entry: existing };
    await this.appendSystem([
      {
        type: 'MEMORY_WRITTEN',
        payload: {
          op: 'reinforce',
          entry_id: existing.id,
          kind: existing.kind,
          text: existing.text,
          weight: decision.weight,
          previous_weight: decision.previous_weight,
          source: w.source,
          source_event_id: null,
          reason: `${w.reason}: ${decision.reason}`,
          embedding_model: existing.embedding_model,
          embedding_dim: existing.embedding_dim,
          metadata: {
            ...w.metadata,
            ...(w.task_id ? { task_id: w.task_id } : {}),
            ...(w.session_id ? { session_id: w.session_id } : {}),
          },
        },
      },
    ]);
    return { op: 'reinforce', entry: (await this.o.store.get(existing.id))! };
  }

  /** Tombstone an entry: a MEMORY_WRITTEN delete on the system stream, then applied. */
  async delete(id: string, reason: string, actor: string | null = null): Promise<StoredMemoryEntry> {
    const entry = await this.get(id);
    if (!entry || entry.deleted) throw new NotFoundError(`memory entry ${id} not found`, { id });
    await this.appendSystem([
      {
        type: 'MEMORY_WRITTEN',
        payload: {
          op: 'delete',
          entry_id: id,
          kind: entry.kind,
          text: entry.text,
          weight: entry.weight,
          previous_weight: entry.weight,
          source: 'user',
          source_event_id: null,
          reason,
          embedding_model: entry.embedding_model,
          embedding_dim: entry.embedding_dim,
          metadata: actor ? { actor } : {},
        },
      },
    ]);
    return { ...entry, deleted: true };
  }

  private async appendSystem(events: NewEvent[]): Promise<void> {
    await this.o.events.append(
      MEMORY_SYSTEM_STREAM,
      events.map((e) => ({ ...e, session_id: SYSTEM_SESSION })),
      { expected: 'any' },
    );
    await this.sync();
  }

  /** Drop the table and the index file and apply the whole log again. */
  async rebuildFromLog(): Promise<number> {
    // one link of the passes' chain: no pass (a read's, or one a heard write starts) runs meanwhile
    const rebuild = this.syncing.catch(() => 0).then(() => this.rebuildNow());
    const passes = rebuild.then(({ applied }) => applied);
    // the caller hears a failure; the next pass starts anyway
    passes.catch(() => undefined);
    this.syncing = passes;
    this.waitingPass = null;
    const { applied, index } = await rebuild;
    await this.positionSaved;
    // an index that outgrew its flat layout meanwhile is being built in a worker, into the same file
    if (index === this.index) index.saveIfDirty();
    return applied;
  }

  private async rebuildNow(): Promise<{ applied: number; index: VectorIndex }> {
    this.rebuildingFromLog = true;
    try {
      return await this.rebuildFromLogNow();
    } finally {
      this.rebuildingFromLog = false;
    }
  }

  private async rebuildFromLogNow(): Promise<{ applied: number; index: VectorIndex }> {
    // a position still on its way must not land after the clear
    await this.positionSaved;
    await this.cancelRebuild();
    this.rebuildReason = null;
    await this.o.store.clear();
    if (this.o.indexPath) VectorIndex.removeFiles(this.o.indexPath);
    const index = await MemoryService.openIndex(this.o);
    this.index = index;
    this.live = await MemoryService.loadLive(this.o);
    this.indexedThrough = 0;
    this.heardWrites = [];
    this.overlayDroppedThrough = 0;
    return { applied: await this.applyPending(true), index };
  }

  /** Persist the index now. */
  flush(): void {
    if (this.saveTimer) clearTimeout(this.saveTimer);
    this.saveTimer = null;
    this.index?.saveIfDirty();
  }

  /**
   * An unfinished rebuild is stopped, not awaited: the next open starts it again. A swap already
   * loading a built index is part of `syncing`, which close awaits; one that comes later sees
   * `closing` and loads nothing.
   */
  async close(): Promise<void> {
    this.closing = true;
    this.stopListening();
    // a writer that took one over keeps its own listing (a release of the decision's changes nothing then)
    for (const [timer, release] of this.decidedListings) {
      clearTimeout(timer);
      release();
    }
    this.decidedListings.clear();
    await this.syncing.catch(() => 0);
    await this.positionSaved;
    await this.cancelRebuild();
    this.flush();
  }
}
