export * from './event-store';
export * from './in-memory-event-store';
export * from './wrapping-event-store';
export * from './event-bus';
export * from './inline-projection';
export * from './sqlite/schema';
export * from './sqlite/positions';
export * from './sqlite/open-sqlite';
export * from './sqlite/sqlite-event-store';
export { rowToEvent } from './sqlite/rows';
export {
  EVENT_INSERT_COLUMNS,
  asChecked,
  buildEnvelopes,
  checkNewEvent,
  eventRowValues,
  validateBatch,
  writerChecked,
  type StreamHead,
  type ValidatedEvent,
} from './append-batch';
export { type EventRow } from './sqlite/rows';
export * from './group-committer';
export { checkLease } from './sqlite/check-lease';
export { type ProjectionModule } from './sqlite/append-writer';
export * from './module-worker';
export * from './postgres/open-postgres';
export * from './postgres/pg-event-store';
export * from './archive/segment';
export * from './archive/archived-streams';
export * from './archive/global-log-page';
export * from './archive/archive-catalog';
export * from './sealing/sealed-payload';
export * from './sealing/sqlite-data-keys';
export * from './sealing/pg-data-keys';
export { PayloadSealer, type CopySealer, type WriteKeys } from './sealing/payload-sealer';
export { KeyRules, erasedSessionError, erasedStreamError } from './sealing/key-rules';
export { PreparedQuery } from './prepared-query';
export * from './sealing/key-wrap';
