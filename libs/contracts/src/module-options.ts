import type { FactoryProvider, ModuleMetadata } from '@nestjs/common';

/**
 * What every lib module's `forRootAsync` takes: a factory (fed by the app,
 * usually from its parsed config) that returns the lib's own options type, the
 * tokens it is called with, and modules those tokens come from.
 */
export interface ModuleAsyncOptions<T> extends Pick<ModuleMetadata, 'imports'> {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  useFactory: (...args: any[]) => T | Promise<T>;
  inject?: FactoryProvider['inject'];
}
