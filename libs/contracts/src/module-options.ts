import type {
  DynamicModule,
  FactoryProvider,
  InjectionToken,
  ModuleMetadata,
  Provider,
  Type,
} from '@nestjs/common';

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

/** What a lib module's `forRootAsync` provides beyond the app's options. */
export interface LibModuleDefinition<T, R> {
  /** the token the app's options are provided under, or what `build` makes of them */
  provide: InjectionToken;
  /** turns the options into the provided value; without it the options themselves are provided */
  build?: (options: T) => R | Promise<R>;
  /** the lib's providers, which inject `provide` or each other */
  providers?: Provider[];
  exports: NonNullable<ModuleMetadata['exports']>;
}

/** The provider of `provide` from the app's factory, passed through `build` when there is one. */
function asyncOptionsProvider<T, R = T>(
  provide: InjectionToken,
  options: ModuleAsyncOptions<T>,
  build?: (options: T) => R | Promise<R>,
): FactoryProvider {
  return {
    provide,
    useFactory: build
      ? async (...args: unknown[]) => build(await options.useFactory(...args))
      : options.useFactory,
    inject: options.inject ?? [],
  };
}

/** A lib module's `forRootAsync`: global, the app's options provided as `definition` says, the ports exported. */
export function forRootAsyncModule<T, R = T>(
  module: Type,
  options: ModuleAsyncOptions<T>,
  definition: LibModuleDefinition<T, R>,
): DynamicModule {
  return {
    module,
    global: true,
    imports: options.imports ?? [],
    providers: [
      asyncOptionsProvider(definition.provide, options, definition.build),
      ...(definition.providers ?? []),
    ],
    exports: definition.exports,
  };
}
