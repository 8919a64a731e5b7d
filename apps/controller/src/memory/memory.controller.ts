import { Controller, Delete, Get, Inject, Param, Query, Req } from '@nestjs/common';
import { IllegalStateError } from '@runledger/contracts';
import { MemoryService } from '@runledger/memory';
import type { AuthenticatedRequest } from '../auth/auth.guard';
import { RequireScope } from '../auth/scopes';
import { ZodPipe } from '../dtos/zod.pipe';
import { MemoryIdParam, MemoryQuery, toMemoryListResponse, toMemorySearchResponse } from './memory.dto';

@Controller('memory')
export class MemoryController {
  /** null when RUNLEDGER_MEMORY=off */
  constructor(@Inject(MemoryService) private readonly memory: MemoryService | null) {}

  private get service(): MemoryService {
    if (!this.memory) throw new IllegalStateError('memory is off (RUNLEDGER_MEMORY=off)');
    return this.memory;
  }

  @Get()
  @RequireScope('admin')
  async list(@Query(new ZodPipe(MemoryQuery, 'query')) q: MemoryQuery) {
    const filter = { kind: q.kind, session_id: q.session_id, task_id: q.task_id, min_weight: q.min_weight };
    if (q.query) return toMemorySearchResponse(await this.service.search(q.query, { ...filter, k: q.k }));
    return toMemoryListResponse(await this.service.list(filter, q.k));
  }

  @Delete(':id')
  @RequireScope('admin')
  async remove(@Param('id', new ZodPipe(MemoryIdParam, 'id')) id: string, @Req() req: AuthenticatedRequest) {
    const entry = await this.service.delete(
      id,
      'deleted through DELETE /memory/:id',
      req.principal?.name ?? null,
    );
    return { id: entry.id, deleted: true as const };
  }
}
