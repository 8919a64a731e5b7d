// first: the schemas below are built under it
import './zod-setup';

export * from './errors';
export * from './task';
export * from './directive';
export * from './agents';
export * from './tool';
export * from './memory';
export * from './permission';
export * from './events';
export * from './ids';
export * from './module-options';
export * from './mcp-tool-name';
export * from './event-versions';
export * from './personal-data';
