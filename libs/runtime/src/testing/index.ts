export * from './test-tools';
export * from './test-runtime';
export * from './temp-store';
export * from './gated-model';
export * from './seven-step-plan';
export * from './holding-finals';
export * from './task-routed-model';
