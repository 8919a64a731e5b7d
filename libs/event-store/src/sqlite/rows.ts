import { RuntimeEvent } from '@runledger/contracts';
import { Selectable, sql } from 'kysely';
import { EventsTable } from './schema';

export type EventRow = Selectable<EventsTable>;

export const rowToEvent = (row: EventRow): RuntimeEvent =>
  ({
    event_id: row.event_id,
    task_id: row.task_id,
    session_id: row.session_id,
    sequence: row.sequence,
    position: row.position,
    type: row.type,
    payload: JSON.parse(row.payload) as unknown,
    causation_id: row.causation_id,
    correlation_id: row.correlation_id,
    created_at: row.created_at,
  }) as RuntimeEvent;

/**
 * The RuntimeEvent as JSON, built by SQLite around the stored payload text, in
 * rowToEvent's key order: what JSON.stringify(rowToEvent(row)) gives (the
 * payload column is JSON.stringify's own output, never rewritten, and
 * json_quote escapes text as JSON.stringify does), without the payload being
 * parsed and serialised again, and with one string per row to hand to
 * JavaScript instead of ten.
 */
export const RAW_EVENT_JSON = sql<string>`'{"event_id":' || json_quote(event_id) || ',"task_id":' || json_quote(task_id) || ',"session_id":' || json_quote(session_id) || ',"sequence":' || sequence || ',"position":' || position || ',"type":' || json_quote(type) || ',"payload":' || payload || ',"causation_id":' || json_quote(causation_id) || ',"correlation_id":' || json_quote(correlation_id) || ',"created_at":' || json_quote(created_at) || '}'`;
