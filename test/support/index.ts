export * from './openai-server';
export * from '../../libs/runtime/src/testing';
export * from './cli';
export * from './postgres';
export * from './served';
export * from './archiving-storage';
export * from './plan-scripts';
export * from './stored-text';
