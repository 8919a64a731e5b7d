import { MemoryKind, RuntimeEvent } from '@runledger/contracts';
import { EventStore } from '@runledger/event-store';
import { cosine } from './embedder';
import { EmbeddingCache } from './embedding-cache';
import {
  LiveEntries,
  MemorySearchHit,
  PendingWrites,
  matchesFilter,
  nearestOf,
  rankHits,
} from './live-entries';
import { MemorySearchOptions, MemoryServiceOptions, exactScanLimit } from './memory-options';
import { MemoryProjection, ownerOfWrite, rowOf } from './memory-projection';
import { MemoryFilter, StoredMemoryEntry, toEntry } from './memory-store';
import { NearestEntry } from './memory-write-policy';
import { HandedWritesFold, UnappliedEntry, foldWrites, uncommitted } from './unapplied-writes';
import { FLAT_UP_TO } from './vector-index';

/** entries a `heard` search overlays on the live ones rather than wait for the pass that applies them */
const OVERLAY_AT_MOST = 128;

/**
 * Reads of memory by similarity: a search ranked by similarity x weight, and the nearest entry for a
 * write's deduplication. Both see what was heard committed and not applied yet where they may
 * (MemoryFreshness), from the heard events themselves.
 */
export class MemorySearch {
  /**
   * An inserting write heard and not applied yet, as a `heard` search overlays it (its label and
   * weight aside): built once per event, kept while the event is in the heard writes
   */
  private readonly overlaid = new WeakMap<RuntimeEvent, { entry: StoredMemoryEntry; vector: Float32Array }>();
  private overlayBuild: Promise<void> | null = null;
  /** the heard fold with the writes other writers handed to the store on top: what deduplication reads */
  private readonly handedFold = new HandedWritesFold();
  /** the vector of each inserting write not applied yet that a deduplication compared with, kept while the write is */
  private readonly unappliedVectors = new WeakMap<RuntimeEvent, Float32Array>();

  constructor(
    private readonly o: MemoryServiceOptions,
    private readonly projection: MemoryProjection,
    private readonly vectors: EmbeddingCache,
  ) {}

  private get events(): EventStore {
    return this.o.events;
  }

  /** Entries ranked by similarity x weight, filters applied. */
  async search(query: string, options: MemorySearchOptions): Promise<MemorySearchHit[]> {
    const filter: MemoryFilter = {
      kind: options.kind,
      session_id: options.session_id,
      sessions: options.sessions,
      task_id: options.task_id,
      min_weight: options.min_weight,
    };
    const k = Math.max(0, options.k);
    if (options.freshness === 'heard' && k > 0) {
      const overHeard = await this.searchOverHeard(query, filter, k);
      if (overHeard) return overHeard;
    }
    await this.projection.sync(options.freshness);
    if (k === 0 || this.projection.live?.size === 0 || this.projection.index.current?.size === 0) return [];
    const q = await this.vectors.embed(query);
    // read after the embedding: an entry applied meanwhile is in the copy, and a dropped copy is not used
    const live = this.projection.live;
    if (live) return live.search(q, filter, k);
    const index = this.projection.index.current;
    const filtered = Object.values(filter).some((v) => v !== undefined);
    const limit = exactScanLimit(this.o);
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
   * `sessions`: only entries written in one of them (see MemoryFilter.sessions).
   */
  async nearest(
    vector: Float32Array,
    kind: MemoryKind,
    taskEvents: readonly RuntimeEvent[] = [],
    sessions?: MemoryFilter['sessions'],
  ): Promise<NearestEntry | null> {
    // what the heard writes do not hold (committed before this instance began to hear, or left out) is applied first
    if (!this.projection.heardWritesHoldUnapplied) await this.projection.sync('heard');
    const handed = this.handedFold.of(this.projection.unappliedHeard(), this.events.handedOver());
    // the task's writes its writer listed are in the handed fold already, in the order they were decided; one
    // whose commit was heard a moment before its writer folded the commit is in the heard fold
    const own = uncommitted(taskEvents).filter(
      (e) =>
        e.type !== 'MEMORY_WRITTEN' ||
        !(this.handedFold.lists(e.event_id) || this.projection.heardFold.holds(e.event_id)),
    );
    const unapplied = foldWrites(handed, own);
    const deleted = new Set<string>();
    for (const u of unapplied.values()) if (u.deleted) deleted.add(u.entry_id);
    let best = await this.nearestStored(vector, kind, deleted, sessions);
    const reweighed = best && unapplied.get(best.entry_id);
    if (best && reweighed) best = { ...best, weight: reweighed.weight };
    const inserts = [...unapplied.values()].filter(
      (u) =>
        u.insertedBy &&
        !u.deleted &&
        u.kind === kind &&
        (sessions === undefined || sessions.includes(ownerOfWrite(u.insertedBy).session_id)),
    );
    // the overlaid entries' vectors, then one embedder call at most for the rest: a wave of tasks may
    // find hundreds of heard writes not applied yet
    const vectorOf = (u: UnappliedEntry) =>
      this.overlaid.get(u.insertedBy!)?.vector ?? this.unappliedVectors.get(u.insertedBy!);
    const unbuilt = inserts.filter((u) => !vectorOf(u));
    const embedded = await this.vectors.embedAll(unbuilt.map((u) => u.text));
    unbuilt.forEach((u, i) => this.unappliedVectors.set(u.insertedBy!, embedded[i]));
    const vectors = inserts.map((u) => vectorOf(u)!);
    inserts.forEach((u, i) => {
      const similarity = cosine(vector, vectors[i]);
      if (!best || similarity > best.similarity)
        best = {
          entry_id: u.entry_id,
          kind: u.kind,
          weight: u.weight,
          similarity,
          // heard: committed; handed over (position 0): decided, maybe never committed
          committed: u.insertedBy!.position > 0,
        };
    });
    return best;
  }

  /**
   * The closest entry applied to the index (or the table), leaving out `deleted`; `sessions`: only
   * entries written in one of them, the index asked for more until one is found or it has no more.
   */
  async nearestStored(
    vector: Float32Array,
    kind: MemoryKind,
    deleted: ReadonlySet<string>,
    sessions?: MemoryFilter['sessions'],
  ): Promise<NearestEntry | null> {
    const index = this.projection.index.current;
    const live = this.projection.live;
    if (!index)
      return live
        ? live.nearest(vector, kind, deleted, sessions)
        : this.nearestByScan(vector, kind, deleted, sessions);
    // so few are scanned exactly either way (a flat index, see FLAT_UP_TO), and the live entries' scan skips other
    // kinds; a scan over a few sessions' entries finds the nearest of them, where the index may hold many others first
    if (live && (live.size <= FLAT_UP_TO || sessions !== undefined))
      return live.nearest(vector, kind, deleted, sessions);
    const filter: MemoryFilter = { kind, sessions };
    // the entries of a few sessions among many: fewer to compare exactly than to dig out of the index
    if (sessions !== undefined && (await this.o.store.countActive(filter)) <= exactScanLimit(this.o))
      return this.nearestByScan(vector, kind, deleted, sessions);
    for (let fetch = 10; ; fetch *= 4) {
      const hits = index.search(vector, fetch);
      const labels = hits.map((h) => h.label);
      // below the exact-scan limit the live entries are in memory: no table to read
      const rows = live ? live.byLabels(labels) : await this.o.store.byLabels(labels);
      for (const h of hits) {
        const entry = rows.get(h.label);
        if (entry && !entry.deleted && matchesFilter(entry, filter) && !deleted.has(entry.id))
          return nearestOf(entry, h.similarity);
      }
      // unfiltered, the ten nearest of any kind decide (a near-duplicate is among them or is none)
      if (sessions === undefined || fetch >= index.size) return null;
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
    const q = await this.vectors.embed(query);
    // the overlaid entries first; the overlay is then built and searched in one go, on one state of what is applied
    for (let attempt = 0; attempt < 3; attempt++) {
      const live = this.projection.live;
      if (!live || !this.projection.heardWritesHoldUnapplied || this.projection.rebuildingFromLog)
        return null;
      const unapplied = [...this.projection.unappliedHeard().values()];
      const inserts = unapplied.filter((u) => u.insertedBy && !u.deleted && !live.has(u.entry_id));
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
      const pending = this.pendingWrites(live, unapplied);
      if (pending) return live.search(q, filter, k, pending);
    }
    return null;
  }

  /**
   * The overlaid entries of inserting writes not applied yet, their vectors from one embedder call.
   * Searches arriving together share one build: the first builds, the others wait for it and look again.
   */
  private buildOverlaid(writes: readonly UnappliedEntry[]): Promise<void> {
    this.overlayBuild ??= this.vectors
      .embedAll(writes.map((u) => u.text))
      .then((vectors) =>
        writes.forEach((u, i) => {
          const row = { ...rowOf(this.o, u.insertedBy!, u.text, vectors[i]), label: 0 };
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
  private pendingWrites(live: LiveEntries, unapplied: readonly UnappliedEntry[]): PendingWrites | null {
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

  /** nearest() while the index is rebuilt (or over a few sessions' entries): every live entry of the kind, compared exactly. */
  private async nearestByScan(
    vector: Float32Array,
    kind: MemoryKind,
    deleted: ReadonlySet<string>,
    sessions?: MemoryFilter['sessions'],
  ): Promise<NearestEntry | null> {
    const filter: MemoryFilter = { kind, sessions };
    const rows = await this.o.store.withVectors(filter, await this.o.store.countActive(filter));
    const scanned = new LiveEntries(rows.length);
    for (const { entry, vector: stored } of rows) scanned.put(entry, stored);
    return scanned.nearest(vector, kind, deleted);
  }
}
