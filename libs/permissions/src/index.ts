export * from './permission-service';
export * from './rule-permission-policy';
export * from './permissions.module';
