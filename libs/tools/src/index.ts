export * from './tool-registry';
export * from './redact';
export * from './discovery';
export * from './plugin-tool-registry';
export * from './memory-tool-service';
export * from './sandbox';
export * from './stderr-tool-logger';
export * from './tools.module';
