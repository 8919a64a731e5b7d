export * from './plan';
export * from './graph';
export * from './substitute';
export * from './execution-scheduler';
