import { RuntimeEvent } from '@runledger/contracts';
import { Selectable } from 'kysely';
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
