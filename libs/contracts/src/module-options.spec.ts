import { FactoryProvider } from '@nestjs/common';
import { ModuleAsyncOptions, forRootAsyncModule } from './module-options';

class LibModule {}
class Port {
  constructor(readonly size: number) {}
}
const OPTIONS = Symbol('OPTIONS');
const CONFIG = Symbol('CONFIG');
const options: ModuleAsyncOptions<{ size: number }> = {
  imports: [class ConfigModule {}],
  inject: [CONFIG],
  useFactory: async (config: { size: number }) => ({ size: config.size * 2 }),
};
const first = (providers: unknown[] | undefined) => providers?.[0] as FactoryProvider;

describe('forRootAsyncModule', () => {
  it('is global, takes the app imports, exports the ports, and lists the lib providers after the options', () => {
    const other = { provide: 'other', useValue: 1 };
    const sut = forRootAsyncModule(LibModule, options, {
      provide: OPTIONS,
      providers: [other],
      exports: [Port],
    });
    expect(sut).toMatchObject({ module: LibModule, global: true, imports: options.imports, exports: [Port] });
    expect(sut.providers?.[1]).toBe(other);
    expect(first(sut.providers)).toMatchObject({ provide: OPTIONS, inject: [CONFIG] });
  });

  it('provides the options themselves without build, and what build makes of them with it', async () => {
    const plain = first(forRootAsyncModule(LibModule, options, { provide: OPTIONS, exports: [] }).providers);
    await expect(plain.useFactory({ size: 3 })).resolves.toEqual({ size: 6 });

    const built = first(
      forRootAsyncModule(LibModule, options, {
        provide: Port,
        build: (o) => new Port(o.size),
        exports: [Port],
      }).providers,
    );
    await expect(built.useFactory({ size: 3 })).resolves.toEqual(new Port(6));
  });

  it('injects nothing and imports nothing when the app names none', () => {
    const sut = forRootAsyncModule(LibModule, { useFactory: () => ({}) }, { provide: OPTIONS, exports: [] });
    expect(sut.imports).toEqual([]);
    expect(first(sut.providers).inject).toEqual([]);
  });
});
