export * from './test-tools';
