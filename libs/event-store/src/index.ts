export * from './event-store';
export * from './in-memory-event-store';
export * from './event-bus';
