import { Controller, Get, Inject, Query } from '@nestjs/common';
import type { z } from 'zod';
import { RequireScope } from '../auth/scopes';
import { AdminEventsQuery, toAdminEventsResponse } from '../dtos/events.dto';
import { ZodPipe } from '../dtos/zod.pipe';
import { ApiBackend } from '../runtime.port';

@Controller('admin/events')
export class AdminEventsController {
  constructor(@Inject(ApiBackend) private readonly backend: ApiBackend) {}

  @Get()
  @RequireScope('admin')
  async list(@Query(new ZodPipe(AdminEventsQuery, 'query')) query: z.output<typeof AdminEventsQuery>) {
    const [events, head] = await Promise.all([
      this.backend.readAll({
        after_position: query.after_position,
        limit: query.limit,
        types: query.type,
        task_id: query.task_id,
      }),
      this.backend.headPosition(),
    ]);
    return toAdminEventsResponse(events, query.after_position, head);
  }
}
