export * from './test-tools';
export * from './test-runtime';
export * from './temp-store';
export * from './seven-step-plan';
