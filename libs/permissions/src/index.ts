export * from './allow-always-scope';
export * from './permission-policy';
export * from './rule-permission-policy';
