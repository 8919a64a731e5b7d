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
import type { Request, Response } from 'express';
import { z } from 'zod';
import { NotFoundError, isFinalEventType, isTerminalStatus } from '@runledger/contracts';
import { RequireScope } from '../auth/scopes';
import { IdParam, ZodPipe, parseOrThrow, queryInt } from '../dtos/zod.pipe';
import { EventBus, EventStore } from '@runledger/event-store';
import { TaskViews } from '@runledger/runtime';
import { EventSource, Follow, eventSourceOf, followEvents } from '../streaming/follow-events';

export const StreamQuery = z.object({ after_seq: queryInt(0, Number.MAX_SAFE_INTEGER).optional() }).strict();
const LastEventId = z
  .string()
  .regex(/^\d{1,15}$/, 'must be an event sequence')
  .transform(Number)
  .optional();

const HEARTBEAT_MS = 15_000;

/** SSE: replay then live; `id:` is the sequence, Last-Event-ID resumes; ends after the final event. */
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
  async stream(
    @Param('task_id', new ZodPipe(IdParam, 'task_id')) taskId: string,
    @Query(new ZodPipe(StreamQuery, 'query')) query: z.output<typeof StreamQuery>,
    @Headers('last-event-id') lastEventIdHeader: unknown,
    @Req() req: Request,
    @Res() res: Response,
  ): Promise<void> {
    const lastEventId = parseOrThrow(LastEventId, lastEventIdHeader, 'Last-Event-ID header');
    const task = await this.tasks.get(taskId);
    if (!task) throw new NotFoundError(`task ${taskId} not found`, { task_id: taskId });
    const afterSeq = lastEventId ?? query.after_seq ?? 0;
    res.writeHead(200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-cache, no-transform',
      Connection: 'keep-alive',
      'X-Accel-Buffering': 'no',
    });
    res.flushHeaders();
    if (isTerminalStatus(task.status) && afterSeq >= task.last_seq) {
      res.end();
      return;
    }
    let closed = false;
    const follow = followEvents(
      this.events,
      { kind: 'task', task_id: taskId, after_seq: afterSeq },
      async (event) => {
        const ok = res.write(
          `id: ${event.sequence}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`,
        );
        if (!ok && !closed)
          await new Promise<void>((resolve) => {
            res.once('drain', resolve);
            res.once('close', resolve);
          });
        return isFinalEventType(event.type) ? 'stop' : undefined;
      },
      { onOverflow: () => res.destroy(), onError: () => res.destroy() },
    );
    this.open.add(follow);
    const heartbeat = setInterval(() => res.write(': keep-alive\n\n'), HEARTBEAT_MS);
    req.on('close', () => {
      closed = true;
      follow.stop();
    });
    await follow.done;
    this.open.delete(follow);
    clearInterval(heartbeat);
    if (!closed) res.end();
  }
}
