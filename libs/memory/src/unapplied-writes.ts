import { MemoryKind, RuntimeEvent } from '@runledger/contracts';

/** What the memory writes memory has not applied yet make of one entry. */
export interface UnappliedEntry {
  entry_id: string;
  kind: MemoryKind;
  text: string;
  weight: number;
  /** the write among those that inserted it (it is in no table or index yet), or null */
  insertedBy: Extract<RuntimeEvent, { type: 'MEMORY_WRITTEN' }> | null;
  deleted: boolean;
}

/**
 * The MEMORY_WRITTEN events memory has not applied, folded per entry as a
 * sync pass would apply them: first the writes it heard committed after
 * `appliedThrough` (in position order), then those a task's writer handed
 * over and has not committed (position 0, at the end of its folded log; a
 * write it committed was heard at its commit, so it is among the first).
 */
export function unappliedWrites(
  heard: readonly RuntimeEvent[],
  taskEvents: readonly RuntimeEvent[],
  appliedThrough: number,
): Map<string, UnappliedEntry> {
  const entries = new Map<string, UnappliedEntry>();
  let uncommitted = taskEvents.length;
  while (uncommitted > 0 && taskEvents[uncommitted - 1].position === 0) uncommitted--;
  const pending = [...heard.filter((e) => e.position > appliedThrough), ...taskEvents.slice(uncommitted)];
  for (const e of pending) {
    if (e.type !== 'MEMORY_WRITTEN') continue;
    const p = e.payload;
    const entry: UnappliedEntry = entries.get(p.entry_id) ?? {
      entry_id: p.entry_id,
      kind: p.kind,
      text: p.text,
      weight: p.weight,
      insertedBy: p.op === 'insert' ? e : null,
      deleted: false,
    };
    if (p.op === 'reinforce' && !entry.deleted) entry.weight = p.weight;
    if (p.op === 'delete') entry.deleted = true;
    entries.set(p.entry_id, entry);
  }
  return entries;
}
