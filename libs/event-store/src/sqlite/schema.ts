import { Generated } from 'kysely';

/** Row of the `events` table: payload as JSON text, position assigned by SQLite. */
export interface EventsTable {
  position: Generated<number>;
  event_id: string;
  task_id: string;
  session_id: string;
  sequence: number;
  type: string;
  payload: string;
  causation_id: string | null;
  correlation_id: string;
  created_at: string;
  /** the payload's shape when written; 1 for rows older than the column */
  schema_version: Generated<number>;
}

/**
 * The tables this lib reads. Other libs widen a handle for their own tables
 * with `db.withTables<TheirTables>()` rather than editing this interface.
 */
export interface Database {
  events: EventsTable;
}
