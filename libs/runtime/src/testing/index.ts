export * from './test-tools';
export * from './test-runtime';
