import { Body, Controller, Get, Headers, HttpCode, Inject, Param, Post, Query } from '@nestjs/common';
import { NotFoundError } from '@runledger/contracts';
import { RequireScope } from '../auth/scopes';
import {
  CancelBody,
  CancelResponse,
  ProvideSecretBody,
  ResolutionResponse,
  ResolvePermissionBody,
} from '../dtos/approvals.dto';
import { TaskEventsQuery, toTaskEventsResponse } from '../dtos/events.dto';
import {
  CreateTaskBody,
  IdempotencyKey,
  ListTasksQuery,
  TaskListResponse,
  TaskResponse,
  toTaskResponse,
} from '../dtos/tasks.dto';
import { IdParam, ZodPipe, parseOrThrow } from '../dtos/zod.pipe';
import { EventStore } from '@runledger/event-store';
import { RuntimeController, TaskViews } from '@runledger/runtime';
import type { z } from 'zod';

const taskIdPipe = new ZodPipe(IdParam, 'task_id');
const requestIdPipe = new ZodPipe(IdParam, 'request_id');

@Controller('tasks')
export class TasksController {
  constructor(
    @Inject(RuntimeController) private readonly runtime: RuntimeController,
    @Inject(TaskViews) private readonly tasks: TaskViews,
    @Inject(EventStore) private readonly store: EventStore,
  ) {}

  @Post()
  @HttpCode(202)
  @RequireScope('tasks:write')
  async submit(
    @Body(new ZodPipe(CreateTaskBody, 'body')) body: z.output<typeof CreateTaskBody>,
    @Headers('idempotency-key') idempotencyKey: unknown,
  ) {
    const { task_id, status } = await this.runtime.submit(body, {
      idempotency_key: parseOrThrow(IdempotencyKey, idempotencyKey, 'Idempotency-Key header') ?? null,
      source: 'api',
    });
    return { task_id, status };
  }

  @Get()
  @RequireScope('tasks:read')
  async list(
    @Query(new ZodPipe(ListTasksQuery, 'query')) query: ListTasksQuery,
  ): Promise<z.infer<typeof TaskListResponse>> {
    const page = await this.tasks.list(query);
    return { tasks: page.tasks.map(toTaskResponse), next_cursor: page.next_cursor };
  }

  @Get(':task_id')
  @RequireScope('tasks:read')
  async get(@Param('task_id', taskIdPipe) taskId: string): Promise<z.infer<typeof TaskResponse>> {
    return toTaskResponse(await this.requireTask(taskId));
  }

  @Get(':task_id/events')
  @RequireScope('tasks:read')
  async events(
    @Param('task_id', taskIdPipe) taskId: string,
    @Query(new ZodPipe(TaskEventsQuery, 'query')) query: z.output<typeof TaskEventsQuery>,
  ) {
    await this.requireTask(taskId);
    return toTaskEventsResponse(await this.store.readStream(taskId, query), query.after_seq);
  }

  @Post(':task_id/cancel')
  @HttpCode(202)
  @RequireScope('tasks:write')
  async cancel(
    @Param('task_id', taskIdPipe) taskId: string,
    @Body(new ZodPipe(CancelBody, 'body')) _body: z.output<typeof CancelBody>,
  ): Promise<z.infer<typeof CancelResponse>> {
    await this.runtime.cancel(taskId);
    return { task_id: taskId, status: (await this.requireTask(taskId)).status };
  }

  @Post(':task_id/permissions/:request_id')
  @HttpCode(202)
  @RequireScope('approvals')
  async resolvePermission(
    @Param('task_id', taskIdPipe) taskId: string,
    @Param('request_id', requestIdPipe) requestId: string,
    @Body(new ZodPipe(ResolvePermissionBody, 'body')) body: z.output<typeof ResolvePermissionBody>,
  ): Promise<z.infer<typeof ResolutionResponse>> {
    await this.runtime.resolvePermission(taskId, requestId, body.decision);
    return { task_id: taskId, request_id: requestId, status: (await this.requireTask(taskId)).status };
  }

  @Post(':task_id/secrets/:request_id')
  @HttpCode(202)
  @RequireScope('approvals')
  async provideSecret(
    @Param('task_id', taskIdPipe) taskId: string,
    @Param('request_id', requestIdPipe) requestId: string,
    @Body(new ZodPipe(ProvideSecretBody, 'body')) body: z.output<typeof ProvideSecretBody>,
  ): Promise<z.infer<typeof ResolutionResponse>> {
    await this.runtime.provideSecret(taskId, requestId, body.secret);
    return { task_id: taskId, request_id: requestId, status: (await this.requireTask(taskId)).status };
  }

  private async requireTask(taskId: string) {
    const task = await this.tasks.get(taskId);
    if (!task) throw new NotFoundError(`task ${taskId} not found`, { task_id: taskId });
    return task;
  }
}
