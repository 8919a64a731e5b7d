/**
 * Positions on SQLite (migration DropEventsAutoincrement): never reused, without gaps. The highest
 * position ever given is the higher of the highest live event's and `event_position_floor`'s, the
 * highest that left the table (archived); each insert takes one past it. Both are seeks: the rowid
 * b-tree's last row and a one-row table. An insert that rolls back gives its position back.
 */
export const LAST_EVENT_POSITION = `max(coalesce((SELECT max(position) FROM events), 0), coalesce((SELECT position FROM event_position_floor WHERE id = 1), 0))`;

/**
 * The value of an inserted row's `position`: every insert into `events` that does not restore an old
 * position names it. SQLite evaluates it once per statement (an uncorrelated subquery), so a
 * statement inserting several rows must add each row's offset (`NEXT_EVENT_POSITION + i`).
 */
export const NEXT_EVENT_POSITION = `(SELECT ${LAST_EVENT_POSITION} + 1)`;
