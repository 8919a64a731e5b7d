export * from './errors';
export * from './task';
export * from './directive';
export * from './tool';
export * from './memory';
export * from './permission';
export * from './events';
export * from './ids';
