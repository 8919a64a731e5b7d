export * from './event-store';
export * from './in-memory-event-store';
export * from './wrapping-event-store';
export * from './event-bus';
export * from './inline-projection';
export * from './sqlite/schema';
export * from './sqlite/open-sqlite';
export * from './sqlite/sqlite-event-store';
export { rowToEvent } from './sqlite/rows';
