import {
  BeforeApplicationShutdown,
  Controller,
  Get,
  Headers,
  Inject,
  Param,
  Query,
  Req,
  Res,
} from '@nestjs/common';
import {
  ApiExtraModels,
  ApiHeader,
  ApiOperation,
  ApiResponse,
  ApiTags,
  getSchemaPath,
} from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { NotFoundError, isFinalEventType, isTerminalStatus } from '@runledger/contracts';
import { RequireScope } from '../auth/scopes';
import { ApiErrors, ApiIdParam, jsonSchemaOf } from '../docs/api-docs';
import { LastEventId, RuntimeEventDto, StreamQuery, StreamQueryDto } from '../dtos/events.dto';
import { IdParam, ZodPipe, parseOrThrow } from '../dtos/zod.pipe';
import { EventBus, EventStore } from '@runledger/event-store';
import { TaskViews } from '@runledger/runtime';
import { EventSource, Follow, eventSourceOf, followEvents } from '../streaming/follow-events';
import { SSE_HEARTBEAT_MS, SseResponse } from '../streaming/sse-response';

/** SSE: replay then live; `id:` is the sequence, Last-Event-ID resumes; ends after the final event. */
@ApiTags('tasks')
@ApiExtraModels(RuntimeEventDto.Output)
@Controller('tasks')
export class TaskStreamController implements BeforeApplicationShutdown {
  /** open streams, stopped on shutdown so the HTTP server can close (it waits for open responses) */
  private readonly open = new Set<Follow>();

  private readonly events: EventSource;

  constructor(
    @Inject(TaskViews) private readonly tasks: TaskViews,
    @Inject(EventStore) store: EventStore,
    @Inject(EventBus) bus: EventBus,
  ) {
    this.events = eventSourceOf(store, bus);
  }

  beforeApplicationShutdown(): void {
    for (const follow of this.open) follow.stop();
  }

  @Get(':task_id/stream')
  @RequireScope('tasks:read')
  @ApiOperation({
    operationId: 'streamTaskEvents',
    summary: "Server-sent events: the task's events, replay then live",
    description:
      'Each message is `id: <sequence>`, `event: <type>`, `data: <RuntimeEvent as JSON>`; a comment line ' +
      `keeps the connection alive every ${SSE_HEARTBEAT_MS / 1000} s. The response ends after the final event (TASK_COMPLETED, ` +
      'TASK_FAILED, TASK_CANCELLED). A reconnect with Last-Event-ID resumes after that sequence; when the ' +
      'task has ended and nothing is left the answer is 204, which stops an EventSource.',
  })
  @ApiIdParam('task_id', 'the task, as returned by POST /tasks')
  @ApiHeader({
    name: 'Last-Event-ID',
    required: false,
    description:
      'resume after this sequence (an EventSource sends it when it reconnects); wins over after_seq',
    schema: jsonSchemaOf(LastEventId),
  })
  @ApiResponse({
    status: 200,
    description: 'an event stream; every `data:` line is one RuntimeEvent',
    content: { 'text/event-stream': { schema: { $ref: getSchemaPath(RuntimeEventDto.Output) } } },
  })
  @ApiResponse({ status: 204, description: 'the task has ended and every event was already received' })
  @ApiErrors({ 400: 'invalid task_id, query or Last-Event-ID', 404: 'no such task' })
  async stream(
    @Param('task_id', new ZodPipe(IdParam, 'task_id')) taskId: string,
    @Query(new ZodPipe(StreamQuery, 'query')) query: StreamQueryDto,
    @Headers('last-event-id') lastEventIdHeader: unknown,
    @Req() req: Request,
    @Res() res: Response,
  ): Promise<void> {
    const lastEventId = parseOrThrow(LastEventId, lastEventIdHeader, 'Last-Event-ID header');
    const task = await this.tasks.get(taskId);
    if (!task) throw new NotFoundError(`task ${taskId} not found`, { task_id: taskId });
    const afterSeq = lastEventId ?? query.after_seq ?? 0;
    if (isTerminalStatus(task.status) && afterSeq >= task.last_seq) {
      // nothing more will ever come; a 204 is what makes an EventSource stop reconnecting
      res.status(204).end();
      return;
    }
    const sse = new SseResponse(req, res);
    const follow = followEvents(
      this.events,
      { kind: 'task', task_id: taskId, after_seq: afterSeq },
      async (events) => {
        // the events up to the task's final one, as one write: the stored JSON text, as it is
        const end = events.findIndex((e) => isFinalEventType(e.type));
        const sent = end === -1 ? events : events.slice(0, end + 1);
        // the next page is read while this one is sent; the client paces the stream
        await sse.write(sent.map((e) => `id: ${e.sequence}\nevent: ${e.type}\ndata: ${e.json}\n\n`).join(''));
        return end === -1 ? undefined : 'stop';
      },
      { onOverflow: sse.abort, onError: sse.abort },
    );
    await sse.serve(follow, this.open);
  }
}
