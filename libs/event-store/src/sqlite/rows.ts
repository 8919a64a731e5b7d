import {
  CURRENT_EVENT_VERSIONING,
  EventVersioning,
  FIRST_SCHEMA_VERSION,
  RuntimeEvent,
  currentSchemaVersion,
  upcastEvent,
} from '@runledger/contracts';
import { Selectable, sql } from 'kysely';
import { RawEvent } from '../event-store';
import { EventsTable } from './schema';

export type EventRow = Selectable<EventsTable>;

/** A stored row as the event readers get: its payload upcast to today's shape (see event-versions.ts). */
export const rowToEvent = (row: EventRow): RuntimeEvent => eventFromRow(row, CURRENT_EVENT_VERSIONING);

/** rowToEvent under a given catalogue of versions. */
export const eventFromRow = (row: EventRow, versioning: EventVersioning): RuntimeEvent =>
  upcastEvent(
    {
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
      schema_version: row.schema_version,
    },
    versioning,
  ) as RuntimeEvent;

/**
 * The RuntimeEvent as JSON, built by the database around the stored payload text, in
 * rowToEvent's key order: what JSON.stringify(rowToEvent(row)) gives for a row of today's version
 * (the payload column is JSON.stringify's own output, never rewritten, and json_quote escapes text
 * as JSON.stringify does), without the payload being parsed and serialised again, and with one
 * string per row to hand to JavaScript instead of eleven. A row of an older version is rebuilt
 * through rowToEvent by `servedRaw`.
 */
export const RAW_EVENT_JSON = sql<string>`'{"event_id":' || json_quote(event_id) || ',"task_id":' || json_quote(task_id) || ',"session_id":' || json_quote(session_id) || ',"sequence":' || sequence || ',"position":' || position || ',"type":' || json_quote(type) || ',"payload":' || payload || ',"causation_id":' || json_quote(causation_id) || ',"correlation_id":' || json_quote(correlation_id) || ',"created_at":' || json_quote(created_at) || ',"schema_version":' || schema_version || '}'`;

/** The version a RAW_EVENT_JSON text was stored at: its last key, an integer. */
const storedVersionOf = (json: string): number => Number(json.slice(json.lastIndexOf(':') + 1, -1));

/**
 * Raw events as served: those stored at today's version as they are, older ones upcast (parsed,
 * lifted, serialised again: slower, and only for events written before their type's shape changed).
 * Only a type past its first version can have older rows, so the others are not looked at.
 */
export function servedRaw(
  rows: RawEvent[],
  versioning: EventVersioning = CURRENT_EVENT_VERSIONING,
): RawEvent[] {
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i];
    const current = currentSchemaVersion(row.type, versioning);
    if (current === FIRST_SCHEMA_VERSION || storedVersionOf(row.json) >= current) continue;
    rows[i] = { ...row, json: JSON.stringify(upcastEvent(JSON.parse(row.json) as RuntimeEvent, versioning)) };
  }
  return rows;
}
