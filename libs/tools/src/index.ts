export * from './tool-registry';
