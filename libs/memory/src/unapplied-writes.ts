import { MemoryKind, RuntimeEvent } from '@runledger/contracts';
import { HandedOver } from '@runledger/event-store';

/** What the memory writes memory has not applied yet make of one entry. */
export interface UnappliedEntry {
  entry_id: string;
  kind: MemoryKind;
  /** the inserting write's text ('' when none of these writes inserts the entry) */
  text: string;
  weight: number;
  /** the write among those that inserted it (it is in no table or index yet), or null */
  insertedBy: Extract<RuntimeEvent, { type: 'MEMORY_WRITTEN' }> | null;
  deleted: boolean;
}

/**
 * The MEMORY_WRITTEN events memory heard committed after `appliedThrough` (in position order), folded
 * per entry as a sync pass would apply them. A task's writes its writer handed over and did not commit
 * yet (`uncommitted`) fold on top of this (`foldWrites`); a write it committed was heard at its commit.
 */
export const unappliedHeard = (
  heard: readonly RuntimeEvent[],
  appliedThrough: number,
): ReadonlyMap<string, UnappliedEntry> =>
  foldWrites(
    new Map(),
    heard.filter((e) => e.position > appliedThrough),
  );

/** The end of a task's folded log its writer handed over and has not committed (position 0). */
export function uncommitted(taskEvents: readonly RuntimeEvent[]): readonly RuntimeEvent[] {
  let from = taskEvents.length;
  while (from > 0 && taskEvents[from - 1].position === 0) from--;
  return taskEvents.slice(from);
}

/**
 * `base` with the MEMORY_WRITTEN among `events` folded on: a new map when they change it, else
 * `base` itself. `base` and its entries are left as they were, so a fold can be kept and built on.
 */
export function foldWrites(
  base: ReadonlyMap<string, UnappliedEntry>,
  events: readonly RuntimeEvent[],
): ReadonlyMap<string, UnappliedEntry> {
  let entries: Map<string, UnappliedEntry> | null = null;
  for (const e of events) {
    if (e.type !== 'MEMORY_WRITTEN') continue;
    entries ??= new Map(base);
    const p = e.payload;
    const before = entries.get(p.entry_id);
    const entry: UnappliedEntry = before
      ? { ...before }
      : {
          entry_id: p.entry_id,
          kind: p.kind,
          text: p.op === 'insert' ? (p.text ?? '') : '',
          weight: p.weight,
          insertedBy: p.op === 'insert' ? e : null,
          deleted: false,
        };
    if (p.op === 'reinforce' && !entry.deleted) entry.weight = p.weight;
    if (p.op === 'delete') entry.deleted = true;
    entries.set(p.entry_id, entry);
  }
  return entries ?? base;
}

/**
 * unappliedHeard, kept until the writes it was folded from or the applied position move: every
 * deduplication reads it, and it changes only when a write is heard or a pass applies some. The
 * list of heard writes is only appended to while it is the same array (replaced when trimmed).
 */
export class HeardWritesFold {
  private kept: {
    heard: readonly RuntimeEvent[];
    length: number;
    appliedThrough: number;
    entries: ReadonlyMap<string, UnappliedEntry>;
    ids: ReadonlySet<string> | null;
  } | null = null;

  of(heard: readonly RuntimeEvent[], appliedThrough: number): ReadonlyMap<string, UnappliedEntry> {
    const kept = this.kept;
    if (kept?.heard === heard && kept.length === heard.length && kept.appliedThrough === appliedThrough)
      return kept.entries;
    const entries = unappliedHeard(heard, appliedThrough);
    this.kept = { heard, length: heard.length, appliedThrough, entries, ids: null };
    return entries;
  }

  /** Whether the last fold took the write `eventId` from the heard ones (built on the first question). */
  holds(eventId: string): boolean {
    const kept = this.kept;
    if (!kept) return false;
    kept.ids ??= new Set(kept.heard.filter((e) => e.position > kept.appliedThrough).map((e) => e.event_id));
    return kept.ids.has(eventId);
  }
}

/**
 * `base` (the heard, unapplied writes) with the MEMORY_WRITTEN listed in the store and not committed
 * yet folded on (EventStore.handOver: writes decided or staged by tasks of this process), kept while
 * neither moves: a wave of tasks deduplicates many times between two changes of the list. A listed
 * write leaves the list when its commit is published, before memory hears it, so none is in both.
 */
export class HandedWritesFold {
  private kept: {
    base: ReadonlyMap<string, UnappliedEntry>;
    version: number;
    writes: readonly RuntimeEvent[];
    ids: ReadonlySet<string>;
    entries: ReadonlyMap<string, UnappliedEntry>;
  } | null = null;

  of(base: ReadonlyMap<string, UnappliedEntry>, handed: HandedOver): ReadonlyMap<string, UnappliedEntry> {
    const kept = this.kept;
    if (kept?.base === base && kept.version === handed.version) return kept.entries;
    const writes = handed.events.filter((e) => e.type === 'MEMORY_WRITTEN');
    // a change of the list that moves no memory write leaves the fold as it was
    const same = kept !== null && sameEvents(kept.writes, writes);
    const entries = same && kept.base === base ? kept.entries : foldWrites(base, writes);
    const ids = same ? kept.ids : new Set(writes.map((e) => e.event_id));
    this.kept = { base, version: handed.version, writes, ids, entries };
    return entries;
  }

  /** Whether the last fold took the write `eventId` from the handed list. */
  lists(eventId: string): boolean {
    return this.kept?.ids.has(eventId) ?? false;
  }
}

const sameEvents = (a: readonly RuntimeEvent[], b: readonly RuntimeEvent[]): boolean =>
  a.length === b.length && a.every((e, i) => e === b[i]);
