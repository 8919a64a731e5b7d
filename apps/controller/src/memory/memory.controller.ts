import { Controller, Delete, Get, Inject, Param, Query, Req } from '@nestjs/common';
import { ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { IllegalStateError } from '@runledger/contracts';
import { MemoryService } from '@runledger/memory';
import type { AuthenticatedRequest } from '../auth/auth.guard';
import { RequireScope } from '../auth/scopes';
import { ApiErrors, ApiIdParam } from '../docs/api-docs';
import { ZodPipe } from '../dtos/zod.pipe';
import {
  MemoryDeleteResponseDto,
  MemoryIdParam,
  MemoryListResponseDto,
  MemoryQuery,
  MemoryQueryDto,
  toMemoryListResponse,
  toMemorySearchResponse,
} from './memory.dto';

@ApiTags('memory')
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
  @ApiOperation({
    operationId: 'listMemory',
    summary: 'Memory entries: with query, ranked by similarity x weight; without, the newest',
  })
  @ApiResponse({ status: 200, description: 'at most k entries', type: MemoryListResponseDto.Output })
  @ApiErrors({ 400: 'invalid query', 409: 'memory is off (RUNLEDGER_MEMORY=off)' })
  async list(@Query(new ZodPipe(MemoryQuery, 'query')) q: MemoryQueryDto) {
    const filter = { kind: q.kind, session_id: q.session_id, task_id: q.task_id, min_weight: q.min_weight };
    if (q.query) return toMemorySearchResponse(await this.service.search(q.query, { ...filter, k: q.k }));
    return toMemoryListResponse(await this.service.list(filter, q.k));
  }

  @Delete(':id')
  @RequireScope('admin')
  @ApiOperation({
    operationId: 'deleteMemoryEntry',
    summary: 'Delete a memory entry (tombstone in the index, MEMORY_WRITTEN op delete in the log)',
  })
  @ApiIdParam('id', 'the memory entry')
  @ApiResponse({ status: 200, description: 'deleted', type: MemoryDeleteResponseDto.Output })
  @ApiErrors({
    400: 'invalid id',
    404: 'no such memory entry',
    409: 'memory is off (RUNLEDGER_MEMORY=off)',
  })
  async remove(@Param('id', new ZodPipe(MemoryIdParam, 'id')) id: string, @Req() req: AuthenticatedRequest) {
    const entry = await this.service.delete(
      id,
      'deleted through DELETE /memory/:id',
      req.principal?.name ?? null,
    );
    return { id: entry.id, deleted: true as const };
  }
}
