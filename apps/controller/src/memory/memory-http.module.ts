import { DynamicModule, Module } from '@nestjs/common';
import { MemoryService } from '@runledger/memory';
import { MEMORY_SERVICE, MemoryController } from './memory.controller';

/**
 * The /memory admin routes. AppModule imports `MemoryHttpModule.forRoot(built.memory?.service ?? null)`;
 * the global auth guard and exception filter apply as to every other route.
 */
@Module({})
export class MemoryHttpModule {
  static forRoot(memory: MemoryService | null): DynamicModule {
    return {
      module: MemoryHttpModule,
      controllers: [MemoryController],
      providers: [{ provide: MEMORY_SERVICE, useValue: memory }],
    };
  }
}
