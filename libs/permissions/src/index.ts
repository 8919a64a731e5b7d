export * from './permission-policy';
export * from './rule-permission-policy';
