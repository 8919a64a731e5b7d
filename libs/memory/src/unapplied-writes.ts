import { MemoryKind, RuntimeEvent } from '@runledger/contracts';

/** What a task's memory writes that memory has not applied yet make of one entry. */
export interface UnappliedEntry {
  entry_id: string;
  kind: MemoryKind;
  text: string;
  weight: number;
  /** the task inserted it (it is in no table or index yet) */
  inserted: boolean;
  deleted: boolean;
}

/**
 * The MEMORY_WRITTEN events of `sources` memory has not applied, folded per
 * entry as a sync pass would apply them, source after source: those not
 * committed (position 0) and those committed after `appliedThrough`. In each
 * source they are at the end (a task's log as its writer folded it, the
 * writes heard and not applied yet): the walk back stops at the first event
 * memory has read.
 */
export function unappliedWrites(
  sources: readonly (readonly RuntimeEvent[])[],
  appliedThrough: number,
): Map<string, UnappliedEntry> {
  const entries = new Map<string, UnappliedEntry>();
  for (const events of sources) {
    let from = events.length;
    while (from > 0) {
      const position = events[from - 1].position;
      if (position > 0 && position <= appliedThrough) break;
      from--;
    }
    for (let i = from; i < events.length; i++) {
      const e = events[i];
      if (e.type !== 'MEMORY_WRITTEN') continue;
      const p = e.payload;
      const known = entries.get(p.entry_id);
      const entry: UnappliedEntry = known ?? {
        entry_id: p.entry_id,
        kind: p.kind,
        text: p.text,
        weight: p.weight,
        inserted: p.op === 'insert',
        deleted: false,
      };
      if (p.op === 'reinforce' && !entry.deleted) entry.weight = p.weight;
      if (p.op === 'delete') entry.deleted = true;
      entries.set(p.entry_id, entry);
    }
  }
  return entries;
}
