import { Controller, Get, Inject, Query } from '@nestjs/common';
import { ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { EventStore, readGlobalLogPage } from '@runledger/event-store';
import { RequireScope } from '../auth/scopes';
import { ApiErrors } from '../docs/api-docs';
import { AdminEventsQuery, AdminEventsQueryDto, AdminEventsResponseDto } from '../dtos/events.dto';
import { ZodPipe } from '../dtos/zod.pipe';

@ApiTags('admin')
@Controller('admin/events')
export class AdminEventsController {
  constructor(@Inject(EventStore) private readonly store: EventStore) {}

  @Get()
  @RequireScope('admin')
  @ApiOperation({ operationId: 'listAllEvents', summary: 'The global event log, by position' })
  @ApiResponse({
    status: 200,
    description: 'events after after_position',
    type: AdminEventsResponseDto.Output,
  })
  @ApiErrors({ 400: 'invalid query' })
  list(@Query(new ZodPipe(AdminEventsQuery, 'query')) query: AdminEventsQueryDto) {
    return readGlobalLogPage(this.store, {
      after_position: query.after_position,
      limit: query.limit,
      types: query.type,
      task_id: query.task_id,
    });
  }
}
