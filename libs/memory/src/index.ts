export * from './embedder';
export * from './memory-store';
export * from './vector-index';
export * from './memory-write-policy';
export * from './memory-service';
export * from './memory-hook';
export * from './memory-policy';
export * from './memory.module';
