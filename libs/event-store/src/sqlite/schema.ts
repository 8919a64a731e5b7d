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
  archive_segments: ArchiveSegmentsTable;
  archived_tasks: ArchivedTasksTable;
}

/** A batch of archived task trees (migration CreateArchive); `content` holds it on PostgreSQL only. */
export interface ArchiveSegmentsTable {
  segment_id: string;
  sha256: string;
  bytes: number;
  task_count: number;
  event_count: number;
  first_position: number;
  last_position: number;
  created_at: string;
  content: Buffer | null;
}

/** Where an archived task's events went; its `tasks` row stays as its summary. */
export interface ArchivedTasksTable {
  task_id: string;
  root_task_id: string;
  session_id: string;
  segment_id: string;
  last_sequence: number;
  event_count: number;
  first_position: number;
  last_position: number;
  archived_at: string;
}
