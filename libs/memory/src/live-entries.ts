import { MemoryKind } from '@runledger/contracts';
import { cosine } from './vector-math';
import { MemoryFilter, StoredMemoryEntry } from './memory-store';
import { NearestEntry } from './memory-write-policy';
import { TopK } from './top-k';

export interface MemorySearchHit {
  entry: StoredMemoryEntry;
  similarity: number;
  /** similarity x weight: the ranking */
  score: number;
}

/** Whether a live entry passes a search filter: the same conditions as MemoryStore's SQL for active rows. */
export const matchesFilter = (e: StoredMemoryEntry, f: MemoryFilter): boolean =>
  (f.kind === undefined || e.kind === f.kind) &&
  (f.session_id === undefined || e.session_id === f.session_id) &&
  (f.sessions === undefined || f.sessions.includes(e.session_id)) &&
  (f.task_id === undefined || e.task_id === f.task_id) &&
  (f.min_weight === undefined || e.weight >= f.min_weight);

/** A stored entry as deduplication sees it: applied, so committed. */
export const nearestOf = (entry: StoredMemoryEntry, similarity: number): NearestEntry => ({
  entry_id: entry.id,
  kind: entry.kind,
  weight: entry.weight,
  similarity,
  committed: true,
});

/** Highest score first; ties by label so the order is stable across index rebuilds. */
export const rankHits = (hits: MemorySearchHit[], k: number): MemorySearchHit[] =>
  hits.sort((a, b) => b.score - a.score || a.entry.label - b.entry.label).slice(0, k);

/**
 * What the MEMORY_WRITTEN events heard and not applied yet will make of the
 * live entries: entries they insert (labelled provisionally, after every
 * applied one, in the order they will be applied), weights they give applied
 * entries, and applied entries they delete.
 */
export interface PendingWrites {
  inserted: readonly { entry: StoredMemoryEntry; vector: Float32Array }[];
  weights: ReadonlyMap<string, number>;
  deleted: ReadonlySet<string>;
}

/**
 * The live (not deleted) entries with their vectors, held in memory while there
 * are at most `limit` of them: what an exact scan reads, without reading the
 * table for every search. MemoryService fills it from the table at open and
 * keeps it in step as it applies MEMORY_WRITTEN events; entries are replaced,
 * never changed in place, so a hit handed out earlier does not change under
 * its holder.
 */
export class LiveEntries {
  private readonly byLabel = new Map<number, { entry: StoredMemoryEntry; vector: Float32Array }>();
  private readonly labelOf = new Map<string, number>();

  constructor(readonly limit: number) {}

  get size(): number {
    return this.byLabel.size;
  }

  has(id: string): boolean {
    return this.labelOf.has(id);
  }

  /** Adds (or replaces) a live entry; false when that would exceed the limit (nothing is added then). */
  put(entry: StoredMemoryEntry, vector: Float32Array): boolean {
    if (!this.labelOf.has(entry.id) && this.labelOf.size >= this.limit) return false;
    this.labelOf.set(entry.id, entry.label);
    this.byLabel.set(entry.label, { entry, vector });
    return true;
  }

  setWeight(id: string, weight: number, updatedAt: string): void {
    const label = this.labelOf.get(id);
    const live = label === undefined ? undefined : this.byLabel.get(label);
    if (live)
      this.byLabel.set(live.entry.label, {
        entry: { ...live.entry, weight, updated_at: updatedAt },
        vector: live.vector,
      });
  }

  remove(id: string): void {
    const label = this.labelOf.get(id);
    if (label === undefined) return;
    this.labelOf.delete(id);
    this.byLabel.delete(label);
  }

  /** The live entries among `labels`: what MemoryStore.byLabels reads, less the tombstones. */
  byLabels(labels: readonly number[]): Map<number, StoredMemoryEntry> {
    const out = new Map<number, StoredMemoryEntry>();
    for (const label of labels) {
      const live = this.byLabel.get(label);
      if (live) out.set(label, live.entry);
    }
    return out;
  }

  /**
   * Every live entry passing the filter, ranked by similarity x weight: the exact scan. Only the
   * best k are kept while it scans, in rankHits' order (a total one: labels are unique). With
   * `pending`, the entries are taken as the writes not applied yet will leave them.
   */
  search(q: Float32Array, filter: MemoryFilter, k: number, pending?: PendingWrites): MemorySearchHit[] {
    const top = new TopK<MemorySearchHit>(
      k,
      (h) => h.score,
      (h) => h.entry.label,
    );
    const consider = (entry: StoredMemoryEntry, vector: Float32Array) => {
      if (!matchesFilter(entry, filter)) return;
      const similarity = cosine(q, vector);
      const score = similarity * entry.weight;
      if (top.admits(score, entry.label)) top.add(score, entry.label, { entry, similarity, score });
    };
    for (const { entry, vector } of this.byLabel.values()) {
      if (pending?.deleted.has(entry.id)) continue;
      const weight = pending?.weights.get(entry.id);
      consider(weight === undefined ? entry : { ...entry, weight }, vector);
    }
    for (const { entry, vector } of pending?.inserted ?? []) consider(entry, vector);
    return top.items;
  }

  /**
   * The most similar live entry of a kind (the lowest label among equals) not in `leaveOut`, and
   * written in one of `sessions` when given (see MemoryFilter.sessions), or null when there is none.
   */
  nearest(
    vector: Float32Array,
    kind: MemoryKind,
    leaveOut: ReadonlySet<string> = new Set(),
    sessions?: MemoryFilter['sessions'],
  ): NearestEntry | null {
    let best: { entry: StoredMemoryEntry; similarity: number } | null = null;
    for (const { entry, vector: stored } of this.byLabel.values()) {
      if (entry.kind !== kind || leaveOut.has(entry.id) || !matchesFilter(entry, { sessions })) continue;
      const similarity = cosine(vector, stored);
      if (
        !best ||
        similarity > best.similarity ||
        (similarity === best.similarity && entry.label < best.entry.label)
      )
        best = { entry, similarity };
    }
    return best ? nearestOf(best.entry, best.similarity) : null;
  }
}
