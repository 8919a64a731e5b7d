import { Controller, Get, Inject, Query } from '@nestjs/common';
import { EventStore } from '@runledger/event-store';
import type { z } from 'zod';
import { RequireScope } from '../auth/scopes';
import { AdminEventsQuery, toAdminEventsResponse } from '../dtos/events.dto';
import { ZodPipe } from '../dtos/zod.pipe';

@Controller('admin/events')
export class AdminEventsController {
  constructor(@Inject(EventStore) private readonly store: EventStore) {}

  @Get()
  @RequireScope('admin')
  async list(@Query(new ZodPipe(AdminEventsQuery, 'query')) query: z.output<typeof AdminEventsQuery>) {
    const [events, head] = await Promise.all([
      this.store.readAll({
        after_position: query.after_position,
        limit: query.limit,
        types: query.type,
        task_id: query.task_id,
      }),
      this.store.head().then((h) => h.position),
    ]);
    return toAdminEventsResponse(events, query.after_position, head);
  }
}
