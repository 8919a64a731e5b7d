import { Controller, Get, Inject, Query } from '@nestjs/common';
import { ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { EventStore } from '@runledger/event-store';
import { RequireScope } from '../auth/scopes';
import { ApiErrors } from '../docs/api-docs';
import {
  AdminEventsQuery,
  AdminEventsQueryDto,
  AdminEventsResponseDto,
  toAdminEventsResponse,
} from '../dtos/events.dto';
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
  async list(@Query(new ZodPipe(AdminEventsQuery, 'query')) query: AdminEventsQueryDto) {
    const [events, head] = await Promise.all([
      this.store.readAll({
        after_position: query.after_position,
        limit: query.limit,
        types: query.type,
        task_id: query.task_id,
      }),
      this.store.head().then((h) => h.position),
    ]);
    // the page covers positions up to its last event (or the head, when nothing live is left after it)
    const through = events.length === query.limit ? events[events.length - 1].position : head;
    const archived = await this.store.archivedRanges(query.after_position, through);
    return toAdminEventsResponse(events, query.after_position, head, archived);
  }
}
