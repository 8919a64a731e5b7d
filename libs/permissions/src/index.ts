export * from './permission-policy';
