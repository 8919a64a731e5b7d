import { EventType, RuntimeEvent } from '@runledger/contracts';
import { ArchivedRange, EventStore } from '../event-store';

/** archived ranges told per page at most */
export const ARCHIVED_RANGES_PER_PAGE = 100;

export interface GlobalLogQuery {
  after_position: number;
  limit: number;
  types?: readonly EventType[];
  task_id?: string;
}

export interface GlobalLogPage {
  /** live events after the cursor that match the query, in position order */
  events: RuntimeEvent[];
  /**
   * The position through which the page covered the log: every position up to it is either in
   * `events`, left out by the query, or in an `archived` range (or was before the cursor). A
   * reader that pages by it moves past archived stretches and never reads the same window twice.
   */
  next_after_position: number;
  head_position: number;
  /** archived stretches starting by next_after_position and reaching past the cursor */
  archived: ArchivedRange[];
}

/**
 * A page of the live global log, with the archived ranges of the stretch it covers. A full page
 * covers up to its last event; a shorter one covers up to the head read before it (appends commit
 * in position order, so nothing at or below that head commits later), so a wholly archived tail,
 * or a filter that matches nothing more, still moves the cursor on. When the stretch holds more
 * archived ranges than a page tells, the page ends just before the first one it does not tell.
 */
export async function readGlobalLogPage(
  store: EventStore,
  query: GlobalLogQuery,
  rangesPerPage = ARCHIVED_RANGES_PER_PAGE,
): Promise<GlobalLogPage> {
  const head = (await store.head()).position;
  const after = query.after_position;
  let events = await store.readAll({
    after_position: after,
    limit: query.limit,
    types: query.types,
    task_id: query.task_id,
  });
  const covered = events.length === query.limit ? events[events.length - 1].position : Math.max(after, head);
  const { archived, through } = await archivedRangesThrough(store, after, covered, rangesPerPage);
  if (through < covered) events = events.filter((e) => e.position <= through);
  return { events, next_after_position: through, head_position: head, archived };
}

/**
 * The archived ranges after `after` that start by `through`, at most `perPage` of them, and the
 * position through which they are all told: `through`, or just before the first range left untold
 * (unless even that one starts at or before `after`: then `through`, some ranges untold).
 */
export async function archivedRangesThrough(
  store: EventStore,
  after: number,
  through: number,
  perPage = ARCHIVED_RANGES_PER_PAGE,
): Promise<{ archived: ArchivedRange[]; through: number }> {
  const ranges = await store.archivedRanges(after, through, perPage + 1);
  if (ranges.length <= perPage) return { archived: ranges, through };
  const untold = ranges[perPage].first_position - 1;
  return { archived: ranges.slice(0, perPage), through: untold > after ? untold : through };
}
