import { RuntimeEvent } from '@runledger/contracts';
import { EmbeddingCache } from './embedding-cache';
import { LiveEntries } from './live-entries';
import { MemoryFreshness, MemoryServiceOptions, exactScanLimit, logOf } from './memory-options';
import { MemoryIndex } from './memory-index';
import { MemoryRow, StoredMemoryEntry, toEntry, vectorToBuffer } from './memory-store';
import { HeardWritesFold, UnappliedEntry } from './unapplied-writes';
import { VectorIndex } from './vector-index';

/**
 * Memory writes with no task behind them (admin deletes, memory tool inserts)
 * go to this stream. It never holds TASK_RECEIVED, so it is not a task.
 */
export const MEMORY_SYSTEM_STREAM = 'system:memory';

/** heard writes nearest() takes without waiting for their pass; past that (passes failing), it waits */
const HEARD_OVERLAY_LIMIT = 1000;
/** MEMORY_WRITTEN events read from the log per statement while syncing */
const SYNC_PAGE = 500;
/** a pass's entries applied at once: one commit for a burst's writes, without hundreds of embedder calls at a time */
const APPLY_AT_ONCE = 16;

/**
 * The table, the index and the live entries as the log's MEMORY_WRITTEN events leave them: applied by
 * passes (`sync`) that read the log from the projection's position, one after the other, and started
 * as soon as a write is heard committed. What was heard and not applied yet is kept, for the reads that
 * do not wait for it.
 */
export class MemoryProjection {
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
  /**
   * What the event store has published to this instance's commit listener: every event from
   * `first` through `through` (adapters publish in position order without a gap, other instances'
   * commits included once they learn of them), and the newest MEMORY_WRITTEN among them.
   */
  private readonly heard = { first: 0, through: 0, newestMemory: 0 };
  /** the MEMORY_WRITTEN events heard and not applied yet (position order): what nearest() adds to the index */
  private heardWrites: RuntimeEvent[] = [];
  /** `heardWrites` past `indexedThrough`, folded: every deduplication and heard search reads it */
  readonly heardFold = new HeardWritesFold();
  /** the live entries are being refilled from the log: only a pass's end says what they hold */
  private refilling = false;
  /** the position of the last heard write left out of `heardWrites` (full): nearest() applies through it first */
  private overlayDroppedThrough = 0;
  /** the last pass's write of the projection position, which no pass waits for */
  private positionSaved: Promise<void> = Promise.resolve();
  private readonly stopListening: () => void;

  constructor(
    private readonly o: MemoryServiceOptions,
    readonly index: MemoryIndex,
    private readonly vectors: EmbeddingCache,
    indexedThrough: number,
    /** the live entries while there are few enough to scan exactly; null above that (or when not kept) */
    private liveEntries: LiveEntries | null,
  ) {
    this.indexedThrough = indexedThrough;
    this.stopListening = o.events.onCommitted((events) => this.hear(events));
  }

  /** The live entries while there are few enough to scan exactly; null above that (or when not kept). */
  get live(): LiveEntries | null {
    return this.liveEntries;
  }

  /** Whether the live entries are being refilled from the log (rebuildFromLog). */
  get rebuildingFromLog(): boolean {
    return this.refilling;
  }

  /** Whatever is committed and not applied is in `heardWrites`: heard, and none left out of a full list. */
  get heardWritesHoldUnapplied(): boolean {
    return this.heardSinceApplied && this.indexedThrough >= this.overlayDroppedThrough;
  }

  /** The writes heard and not applied yet, folded by entry. */
  unappliedHeard(): ReadonlyMap<string, UnappliedEntry> {
    return this.heardFold.of(this.heardWrites, this.indexedThrough);
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

  /** Runs `work` as a link of the passes' chain: no pass runs meanwhile. */
  inTurn(work: () => Promise<number>): Promise<number> {
    this.syncing = this.syncing.catch(() => 0).then(work);
    return this.syncing;
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
    if (index === this.index.current) index.saveIfDirty();
    return applied;
  }

  /** Stops hearing commits; resolves once the pass under way and the last position write are done. */
  async close(): Promise<void> {
    this.stopListening();
    await this.syncing.catch(() => 0);
    await this.positionSaved;
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
        logOf(this.o)('memory: applying what was heard failed; the next read applies it', err),
      );
  }

  /** Everything committed after what was applied reached the commit listener: nothing from before it listened. */
  private get heardSinceApplied(): boolean {
    return this.heard.first > 0 && this.indexedThrough >= this.heard.first - 1;
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
    // a pass from the log's start (a rebuild, a first fill) reads archived tasks' writes too; later
    // passes start past them: a task is archived only once it ended, after its writes were applied
    const archived = after === 0;
    let applied = 0;
    for (;;) {
      const page = await this.o.events.readAll({
        after_position: after,
        types: ['MEMORY_WRITTEN'],
        limit: SYNC_PAGE,
        archived,
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
        logOf(this.o)('memory projection position not saved', err);
      });
      this.index.scheduleSave();
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
    // A reinforce of an entry no write stored (the insert it saw was on its way to the log in another
    // task that then failed, or commits after it) stores the entry from the text it carries: the
    // reinforcing writer's own (an older log's: the entry's). One that carries none changes nothing.
    if ((p.op === 'insert' || p.op === 'reinforce') && !existing) {
      if (p.text === undefined) return;
      const vector = await this.vectors.embed(p.text);
      const row = rowOf(this.o, e, p.text, vector);
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
      this.liveEntries?.setWeight(p.entry_id, p.weight, e.created_at);
    } else if (p.op === 'delete' && existing) {
      if (!existing.deleted) await this.o.store.tombstone(p.entry_id, e.created_at);
      this.index.current?.remove(existing.label);
      this.liveEntries?.remove(existing.id);
    }
  }

  /** An entry already in the table (applied before a crash, or by another instance): the index and live entries learn it. */
  private async learnStored(entry: StoredMemoryEntry): Promise<void> {
    // while a worker rebuilds the index there is none to add to: the rebuilt file is caught up from the table
    const index = this.index.current;
    const toIndex = index !== null && !index.has(entry.label);
    const toLive = this.liveEntries !== null && !entry.deleted && !this.liveEntries.has(entry.id);
    if (!toIndex && !toLive) return;
    const vector = await this.o.store.vector(entry.id);
    if (!vector) return;
    if (toIndex) this.addToIndex(entry.label, vector, entry.deleted);
    if (toLive) this.keepLive(entry, vector);
  }

  private addToIndex(label: number, vector: Float32Array, deleted = false): void {
    this.index.add(label, vector, deleted, this.refilling);
  }

  /** Keeps a live entry in memory; past the exact-scan limit the copy is dropped and searches read the table. */
  private keepLive(entry: StoredMemoryEntry, vector: Float32Array): void {
    if (this.liveEntries && !this.liveEntries.put(entry, vector)) this.liveEntries = null;
  }

  private async rebuildNow(): Promise<{ applied: number; index: VectorIndex }> {
    this.refilling = true;
    try {
      return await this.rebuildFromLogNow();
    } finally {
      this.refilling = false;
    }
  }

  private async rebuildFromLogNow(): Promise<{ applied: number; index: VectorIndex }> {
    // a position still on its way must not land after the clear
    await this.positionSaved;
    await this.index.dropForRebuild();
    await this.o.store.clear();
    const index = await this.index.startOver();
    this.liveEntries = await loadLive(this.o);
    this.indexedThrough = 0;
    this.heardWrites = [];
    this.overlayDroppedThrough = 0;
    return { applied: await this.applyPending(true), index };
  }
}

/** The table's live entries in memory, or null when there are more than an exact scan takes (or none are kept). */
export async function loadLive(o: MemoryServiceOptions): Promise<LiveEntries | null> {
  if (o.keepLiveEntries === false) return null;
  const limit = exactScanLimit(o);
  const rows = await o.store.withVectors({}, limit + 1);
  if (rows.length > limit) return null;
  const live = new LiveEntries(limit);
  for (const { entry, vector } of rows) live.put(entry, vector);
  return live;
}

/**
 * The task and session an entry written by `e` belongs to: the writing task's, or for a write on
 * the system stream (memory tools, admin) the ones it names in its metadata (null: nobody's).
 */
export function ownerOfWrite(e: Extract<RuntimeEvent, { type: 'MEMORY_WRITTEN' }>): {
  task_id: string | null;
  session_id: string | null;
} {
  if (e.task_id !== MEMORY_SYSTEM_STREAM) return { task_id: e.task_id, session_id: e.session_id };
  const meta = e.payload.metadata as { task_id?: unknown; session_id?: unknown };
  return {
    task_id: typeof meta.task_id === 'string' ? meta.task_id : null,
    session_id: typeof meta.session_id === 'string' ? meta.session_id : null,
  };
}

/** The table row a MEMORY_WRITTEN storing `text` gives its entry, less the label the insert assigns. */
export function rowOf(
  o: MemoryServiceOptions,
  e: Extract<RuntimeEvent, { type: 'MEMORY_WRITTEN' }>,
  text: string,
  vector: Float32Array,
): Omit<MemoryRow, 'label'> {
  const p = e.payload;
  return {
    id: p.entry_id,
    text,
    kind: p.kind,
    source: p.source,
    weight: p.weight,
    ...ownerOfWrite(e),
    metadata: JSON.stringify(p.metadata),
    embedding_model: o.embedder.model,
    embedding_dim: o.embedder.dim,
    vector: vectorToBuffer(vector),
    deleted: 0,
    written_by: e.event_id,
    created_at: e.created_at,
    updated_at: e.created_at,
  };
}
