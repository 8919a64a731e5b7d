import { EventPayload, MemoryKind, RuntimeEvent } from '@runledger/contracts';
import { EmbeddingCache } from './embedding-cache';
import { MemorySearchHit } from './live-entries';
import { MemoryFreshness, MemorySearchOptions, MemoryServiceOptions } from './memory-options';
import {
  MemoryIndex,
  MemoryIndexStatus,
  OUTGREW_FLAT,
  buildsIndexInWorker,
  indexSource,
  openIndex,
  reembedStale,
} from './memory-index';
import { MemoryProjection, loadLive } from './memory-projection';
import { MemorySearch } from './memory-search';
import { MemoryFilter, StoredMemoryEntry } from './memory-store';
import { DEFAULT_MEMORY_POLICY, MemoryPolicyConfig, NearestEntry } from './memory-write-policy';
import { DecidedWrite, DirectWrite, MemoryWrites } from './memory-writes';
import { VectorIndex } from './vector-index';

export type { MemoryFreshness, MemorySearchOptions, MemoryServiceOptions } from './memory-options';
export type { MemoryIndexStatus } from './memory-index';
export { MEMORY_SYSTEM_STREAM } from './memory-projection';
export type { DecidedWrite, DirectWrite } from './memory-writes';
export type { MemorySearchHit } from './live-entries';

/**
 * Memory as a projection of MEMORY_WRITTEN events. A write is appended to the
 * log first and applied to the table and index by `sync`, which reads the log
 * from the projection's checkpoint; every read syncs first, so what a task's
 * hook wrote is visible to the next task, and `rebuildFromLog` is the same code
 * run from position 0. The parts: the projection (MemoryProjection), its
 * vector index (MemoryIndex), the reads by similarity (MemorySearch) and the
 * writes (MemoryWrites).
 */
export class MemoryService {
  private readonly vectors: EmbeddingCache;
  private readonly index: MemoryIndex;
  private readonly projection: MemoryProjection;
  private readonly reads: MemorySearch;
  private readonly writes: MemoryWrites;

  private constructor(
    private readonly o: MemoryServiceOptions,
    index: VectorIndex | null,
    indexedThrough: number,
    live: Awaited<ReturnType<typeof loadLive>>,
  ) {
    this.vectors = new EmbeddingCache(o.embedder);
    this.index = new MemoryIndex(o, index, (work) => this.projection.inTurn(work));
    this.projection = new MemoryProjection(o, this.index, this.vectors, indexedThrough, live);
    this.reads = new MemorySearch(o, this.projection, this.vectors);
    this.writes = new MemoryWrites(o, this.projection, this.reads, this.vectors);
  }

  static async open(o: MemoryServiceOptions): Promise<MemoryService> {
    await reembedStale(o.store, o.embedder);
    // an empty table has nothing to rebuild: open writes its empty index at once
    const file =
      buildsIndexInWorker(o) && (await o.store.stats()).rows > 0
        ? await VectorIndex.inspect(o.indexPath, o.embedder.model, o.embedder.dim, indexSource(o))
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
      workerBuild ? null : await openIndex(o, file ?? undefined),
      indexedThrough,
      await loadLive(o),
    );
    if (workerBuild) svc.index.rebuildInWorker(workerBuild.reason, workerBuild);
    await svc.sync();
    return svc;
  }

  get embeddingModel(): string {
    return this.o.embedder.model;
  }

  get embeddingDim(): number {
    return this.o.embedder.dim;
  }

  /** why the index was rebuilt from the table at open, or null when its file was used */
  get indexRebuiltBecause(): string | null {
    return this.index.rebuiltBecause;
  }

  get indexStatus(): MemoryIndexStatus {
    return this.index.status;
  }

  /** Resolves once the index is ready (at once when no rebuild runs). */
  indexReady(): Promise<void> {
    return this.index.ready();
  }

  embed(text: string): Promise<Float32Array> {
    return this.vectors.embed(text);
  }

  /** Apply every MEMORY_WRITTEN after the checkpoint (`freshness`: what it must see); see MemoryProjection.sync. */
  sync(freshness: MemoryFreshness = 'committed'): Promise<number> {
    return this.projection.sync(freshness);
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
  search(query: string, options: MemorySearchOptions): Promise<MemorySearchHit[]> {
    return this.reads.search(query, options);
  }

  /** The closest live entry to a vector, for deduplication; see MemorySearch.nearest. */
  nearest(
    vector: Float32Array,
    kind: MemoryKind,
    taskEvents: readonly RuntimeEvent[] = [],
    sessions?: MemoryFilter['sessions'],
  ): Promise<NearestEntry | null> {
    return this.reads.nearest(vector, kind, taskEvents, sessions);
  }

  /** nearest() and `decide`'s write on what it found, one decision at a time; see MemoryWrites.decideWrite. */
  decideWrite(
    vector: Float32Array,
    kind: MemoryKind,
    taskEvents: readonly RuntimeEvent[],
    sessionId: string | null,
    decide: (nearest: NearestEntry | null) => DecidedWrite | null,
  ): Promise<DecidedWrite | null> {
    return this.writes.decideWrite(vector, kind, taskEvents, sessionId, decide);
  }

  /** A MEMORY_WRITTEN payload for a new entry (the id is chosen here, so the writer can return it). */
  insertPayload(w: DirectWrite, sourceEventId: string | null): EventPayload<'MEMORY_WRITTEN'> {
    return this.writes.insertPayload(w, sourceEventId);
  }

  /** Write with no task stream to append to (memory tools, admin): the system stream, then apply. */
  insert(w: DirectWrite): Promise<StoredMemoryEntry> {
    return this.writes.insert(w);
  }

  /** A direct write under the outcome hook's rules (no secret, a near-duplicate reinforces); see MemoryWrites.remember. */
  remember(
    w: DirectWrite,
    policy: MemoryPolicyConfig = DEFAULT_MEMORY_POLICY,
  ): Promise<{ op: 'insert' | 'reinforce' | 'none'; entry: StoredMemoryEntry }> {
    return this.writes.remember(w, policy);
  }

  /** Tombstone an entry: a MEMORY_WRITTEN delete on the system stream, then applied. */
  delete(id: string, reason: string, actor: string | null = null): Promise<StoredMemoryEntry> {
    return this.writes.delete(id, reason, actor);
  }

  /**
   * Forget an erased session's entries: each tombstoned (a MEMORY_WRITTEN delete on the system
   * stream, so the index and every instance drop it), then their text scrubbed from the table.
   * Returns how many were live.
   */
  async forgetSession(sessionId: string): Promise<number> {
    await this.sync();
    const forgotten = await this.tombstoneEach({ session_id: sessionId }, 'session erased');
    if ((await this.o.store.scrubSession(sessionId)) > 0) await this.index.rewrite();
    return forgotten;
  }

  /**
   * Forget an erased task tree's entries (those written for one of `taskIds`), as forgetSession
   * does a session's. Returns how many were live.
   */
  async forgetTasks(taskIds: readonly string[]): Promise<number> {
    await this.sync();
    let forgotten = 0;
    for (const taskId of taskIds)
      forgotten += await this.tombstoneEach({ task_id: taskId }, 'task tree erased');
    if ((await this.o.store.scrubTasks(taskIds)) > 0) await this.index.rewrite();
    return forgotten;
  }

  /** Tombstone every live entry `filter` matches. Returns how many there were. */
  private async tombstoneEach(filter: MemoryFilter, reason: string): Promise<number> {
    let count = 0;
    for (;;) {
      const page = await this.o.store.list(filter, 200);
      if (page.length === 0) return count;
      for (const entry of page) await this.writes.delete(entry.id, reason);
      count += page.length;
    }
  }

  /** Drop the table and the index file and apply the whole log again. */
  rebuildFromLog(): Promise<number> {
    return this.projection.rebuildFromLog();
  }

  /** Persist the index now. */
  flush(): void {
    this.index.flush();
  }

  /**
   * An unfinished rebuild is stopped, not awaited: the next open starts it again. A swap already
   * loading a built index is part of the passes' chain, which close awaits; one that comes later
   * loads nothing.
   */
  async close(): Promise<void> {
    this.index.stopBuilding();
    const drained = this.projection.close();
    this.writes.close();
    await drained;
    await this.index.cancelRebuild();
    this.flush();
  }
}
