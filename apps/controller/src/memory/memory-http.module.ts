import { Module } from '@nestjs/common';
import { MemoryController } from './memory.controller';

/**
 * The /memory admin routes over the MemoryService MemoryModule provides (null
 * when memory is off); the global auth guard and exception filter apply as to every other route.
 */
@Module({ controllers: [MemoryController] })
export class MemoryHttpModule {}
