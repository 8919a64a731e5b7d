import { EventType, RuntimeEvent } from '@runledger/contracts';
import { Selectable } from 'kysely';
import { RawEvent } from '../event-store';
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

const quote = JSON.stringify;

/**
 * A row as a RawEvent: the envelope written around the stored payload text,
 * in rowToEvent's key order, so `json` is what JSON.stringify(rowToEvent(row))
 * gives (the payload column is JSON.stringify's own output, never rewritten)
 * without parsing the payload or serialising it again.
 */
export const rowToRawEvent = (row: EventRow): RawEvent => ({
  position: row.position,
  sequence: row.sequence,
  task_id: row.task_id,
  type: row.type as EventType,
  json:
    `{"event_id":${quote(row.event_id)},"task_id":${quote(row.task_id)},"session_id":${quote(row.session_id)},` +
    `"sequence":${row.sequence},"position":${row.position},"type":${quote(row.type)},"payload":${row.payload},` +
    `"causation_id":${quote(row.causation_id)},"correlation_id":${quote(row.correlation_id)},` +
    `"created_at":${quote(row.created_at)}}`,
});
