import { MemoryKind } from '@runledger/contracts';
import { cosine } from './embedder';
import { MemoryFilter, StoredMemoryEntry } from './memory-store';
import type { MemorySearchHit } from './memory-service';
import { NearestEntry } from './memory-write-policy';

/** Whether a live entry passes a search filter: the same conditions as MemoryStore's SQL for active rows. */
export const matchesFilter = (e: StoredMemoryEntry, f: MemoryFilter): boolean =>
  (f.kind === undefined || e.kind === f.kind) &&
  (f.session_id === undefined || e.session_id === f.session_id) &&
  (f.task_id === undefined || e.task_id === f.task_id) &&
  (f.min_weight === undefined || e.weight >= f.min_weight);

/** Highest score first; ties by label so the order is stable across index rebuilds. */
export const rankHits = (hits: MemorySearchHit[], k: number): MemorySearchHit[] =>
  hits.sort((a, b) => b.score - a.score || a.entry.label - b.entry.label).slice(0, k);

/**
 * The live (not deleted) entries with their vectors, held in memory while there
 * are at most `limit` of them: what an exact scan reads, without reading the
 * table for every search. MemoryService fills it from the table at open and
 * keeps it in step as it applies MEMORY_WRITTEN events; entries are replaced,
 * never changed in place, so a hit handed out earlier does not change under
 * its holder.
 */
export class LiveEntries {
  private readonly byId = new Map<string, { entry: StoredMemoryEntry; vector: Float32Array }>();

  constructor(readonly limit: number) {}

  get size(): number {
    return this.byId.size;
  }

  has(id: string): boolean {
    return this.byId.has(id);
  }

  /** Adds (or replaces) a live entry; false when that would exceed the limit (nothing is added then). */
  put(entry: StoredMemoryEntry, vector: Float32Array): boolean {
    if (!this.byId.has(entry.id) && this.byId.size >= this.limit) return false;
    this.byId.set(entry.id, { entry, vector });
    return true;
  }

  setWeight(id: string, weight: number, updatedAt: string): void {
    const live = this.byId.get(id);
    if (live)
      this.byId.set(id, { entry: { ...live.entry, weight, updated_at: updatedAt }, vector: live.vector });
  }

  remove(id: string): void {
    this.byId.delete(id);
  }

  /** Every live entry passing the filter, ranked by similarity x weight: the exact scan. */
  search(q: Float32Array, filter: MemoryFilter, k: number): MemorySearchHit[] {
    const hits: MemorySearchHit[] = [];
    for (const { entry, vector } of this.byId.values()) {
      if (!matchesFilter(entry, filter)) continue;
      const similarity = cosine(q, vector);
      hits.push({ entry, similarity, score: similarity * entry.weight });
    }
    return rankHits(hits, k);
  }

  /** The most similar live entry of a kind (the lowest label among equals), or null when there is none. */
  nearest(vector: Float32Array, kind: MemoryKind): NearestEntry | null {
    let best: { entry: StoredMemoryEntry; similarity: number } | null = null;
    for (const { entry, vector: stored } of this.byId.values()) {
      if (entry.kind !== kind) continue;
      const similarity = cosine(vector, stored);
      if (
        !best ||
        similarity > best.similarity ||
        (similarity === best.similarity && entry.label < best.entry.label)
      )
        best = { entry, similarity };
    }
    return best
      ? {
          entry_id: best.entry.id,
          kind: best.entry.kind,
          text: best.entry.text,
          weight: best.entry.weight,
          similarity: best.similarity,
        }
      : null;
  }
}
