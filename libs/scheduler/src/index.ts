export * from './plan';
export * from './graph';
export * from './substitute';
