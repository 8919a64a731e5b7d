export * from './allow-always-scope';
export * from './permission-policy';
export * from './rule-permission-policy';
export { commandUsesSudo, SUDO_SECRET } from './shell/shell-parse';
export * from './provider-keys';
