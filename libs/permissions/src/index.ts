export * from './allow-always-scope';
export * from './permission-service';
export * from './rule-permission-policy';
export * from './permissions.module';
export { commandUsesSudo, SUDO_SECRET } from './shell/shell-parse';
export * from './provider-keys';
export * from './os-sandbox-rules';
export { isReadOnlyCommand } from './read-commands';
