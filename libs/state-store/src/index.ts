export * from './task-state';
export * from './schema';
export * from './task-state-store';
export * from './checkpoint-store';
export * from './storage';
export * from './process-registry';
export * from './storage.module';
export * from './task-stats';
