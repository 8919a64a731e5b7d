import { Body, Controller, Get, Headers, HttpCode, Inject, Param, Post, Query } from '@nestjs/common';
import { ApiBody, ApiHeader, ApiOperation, ApiParam, ApiResponse, ApiTags } from '@nestjs/swagger';
import { NotFoundError, SignalName } from '@runledger/contracts';
import { RequireScope } from '../auth/scopes';
import { ApiBackpressure, ApiErrors, ApiIdParam, jsonSchemaOf } from '../docs/api-docs';
import {
  CancelBody,
  CancelDto,
  CancelResponse,
  CancelResponseDto,
  ProvideSecretBody,
  ProvideSecretDto,
  ResolutionResponse,
  ResolutionResponseDto,
  ResolvePermissionBody,
  ResolvePermissionDto,
} from '../dtos/approvals.dto';
import {
  TaskEventsQuery,
  TaskEventsQueryDto,
  TaskEventsResponseDto,
  toTaskEventsResponse,
} from '../dtos/events.dto';
import {
  CreateTaskBody,
  CreateTaskDto,
  ForkTaskBody,
  ForkTaskDto,
  IdempotencyKey,
  ListTasksQuery,
  ListTasksQueryDto,
  SubmitResponseDto,
  TaskChildrenResponse,
  TaskChildrenResponseDto,
  TaskWaitingDetailResponse,
  TaskWaitingDetailResponseDto,
  waitingFor,
  TaskListResponse,
  TaskListResponseDto,
  TaskResponse,
  TaskResponseDto,
  toChildTaskResponse,
  toTaskDetailResponse,
  toTaskResponse,
} from '../dtos/tasks.dto';
import { IdParam, ZodPipe, parseOrThrow } from '../dtos/zod.pipe';
import { TaskCallbacks } from '../outbound/task-callbacks';
import { SendSignalBody, SendSignalDto, SignalResponse, SignalResponseDto } from '../dtos/signals.dto';
import { EventStore } from '@runledger/event-store';
import { RuntimeController, TaskTree, TaskViews } from '@runledger/runtime';
import type { z } from 'zod';

const taskIdPipe = new ZodPipe(IdParam, 'task_id');
const requestIdPipe = new ZodPipe(IdParam, 'request_id');
const signalNamePipe = new ZodPipe(SignalName, 'name');
const ApiTaskId = () => ApiIdParam('task_id', 'the task, as returned by POST /tasks');
const ApiRequestId = () => ApiIdParam('request_id', "a pending request of the task (its state's `pending`)");

@ApiTags('tasks')
@Controller('tasks')
export class TasksController {
  constructor(
    @Inject(RuntimeController) private readonly runtime: RuntimeController,
    @Inject(TaskViews) private readonly tasks: TaskViews,
    @Inject(EventStore) private readonly store: EventStore,
    @Inject(TaskTree) private readonly tree: TaskTree,
    @Inject(TaskCallbacks) private readonly callbacks: TaskCallbacks,
  ) {}

  @Post()
  @HttpCode(202)
  @ApiBackpressure()
  @RequireScope('tasks:write')
  @ApiOperation({
    operationId: 'submitTask',
    summary: 'Submit a task; it runs in the background',
    description:
      'Answers once TASK_RECEIVED is durable; the task then waits for one of RUNLEDGER_CONCURRENCY run slots. ' +
      'A saturated server refuses at once (429 or 503 with Retry-After) rather than answer late.',
  })
  @ApiHeader({
    name: 'Idempotency-Key',
    required: false,
    description: 'the same key and body return the same task; the same key with another body is 409',
    schema: jsonSchemaOf(IdempotencyKey),
  })
  @ApiResponse({
    status: 202,
    description: 'accepted: recorded durably, queued to run',
    type: SubmitResponseDto.Output,
  })
  @ApiErrors({
    400: 'invalid body or Idempotency-Key',
    409: "the Idempotency-Key was used with another body, or the session's strategy is reject and a task of it is unfinished (session_busy, details.task_id)",
    413: 'body larger than RUNLEDGER_BODY_LIMIT',
  })
  async submit(
    @Body(new ZodPipe(CreateTaskBody, 'body')) body: CreateTaskDto,
    @Headers('idempotency-key') idempotencyKey: unknown,
  ) {
    const { callback_url, callback_token, ...task } = body;
    const { task_id, status } = await this.runtime.submit(task, {
      idempotency_key: parseOrThrow(IdempotencyKey, idempotencyKey, 'Idempotency-Key header') ?? null,
      source: 'api',
    });
    if (callback_url) await this.callbacks.ensure(task_id, callback_url, callback_token ?? null);
    return { task_id, status };
  }

  @Get()
  @RequireScope('tasks:read')
  @ApiOperation({ operationId: 'listTasks', summary: 'List tasks, newest first, cursor paginated' })
  @ApiResponse({ status: 200, description: 'a page of tasks', type: TaskListResponseDto.Output })
  @ApiErrors({ 400: 'invalid query' })
  async list(
    @Query(new ZodPipe(ListTasksQuery, 'query')) query: ListTasksQueryDto,
  ): Promise<z.infer<typeof TaskListResponse>> {
    const page = await this.tasks.list(query);
    return { tasks: page.tasks.map(toTaskResponse), next_cursor: page.next_cursor };
  }

  @Get(':task_id')
  @RequireScope('tasks:read')
  @ApiOperation({
    operationId: 'getTask',
    summary:
      'Task state: status, stop reason, result, pending requests (its own and those of the tasks it delegated to), usage, place in its tree, todos',
  })
  @ApiTaskId()
  @ApiResponse({ status: 200, description: 'the task', type: TaskWaitingDetailResponseDto.Output })
  @ApiErrors({ 400: 'invalid task_id', 404: 'no such task' })
  async get(@Param('task_id', taskIdPipe) taskId: string): Promise<TaskWaitingDetailResponse> {
    const task = await this.requireTask(taskId);
    const lineage = await this.tree.lineage(taskId);
    if (!lineage) throw new NotFoundError(`task ${taskId} not found`, { task_id: taskId });
    return {
      ...toTaskDetailResponse(
        task,
        lineage,
        await this.tree.descendantsPending(taskId),
        await this.tree.todos(taskId),
      ),
      waiting_for:
        task.status === 'waiting' || task.status === 'queued'
          ? waitingFor(await this.runtime.progress(taskId))
          : null,
    };
  }

  @Get(':task_id/children')
  @RequireScope('tasks:read')
  @ApiOperation({
    operationId: 'listTaskChildren',
    summary: 'The tasks this task delegated to, in the order they started, with their states',
  })
  @ApiTaskId()
  @ApiResponse({ status: 200, description: "the task's children", type: TaskChildrenResponseDto.Output })
  @ApiErrors({ 400: 'invalid task_id', 404: 'no such task' })
  async children(@Param('task_id', taskIdPipe) taskId: string): Promise<TaskChildrenResponse> {
    await this.requireTask(taskId);
    return { task_id: taskId, children: (await this.tree.children(taskId)).map(toChildTaskResponse) };
  }

  @Get(':task_id/events')
  @RequireScope('tasks:read')
  @ApiOperation({ operationId: 'listTaskEvents', summary: "A page of the task's events, by sequence" })
  @ApiTaskId()
  @ApiResponse({ status: 200, description: 'events after after_seq', type: TaskEventsResponseDto.Output })
  @ApiErrors({ 400: 'invalid task_id or query', 404: 'no such task' })
  async events(
    @Param('task_id', taskIdPipe) taskId: string,
    @Query(new ZodPipe(TaskEventsQuery, 'query')) query: TaskEventsQueryDto,
  ) {
    await this.requireTask(taskId);
    return toTaskEventsResponse(await this.store.readStream(taskId, query), query.after_seq);
  }

  @Post(':task_id/cancel')
  @HttpCode(202)
  @RequireScope('tasks:write')
  @ApiOperation({ operationId: 'cancelTask', summary: 'Cancel a task (and its child tasks)' })
  @ApiTaskId()
  @ApiBody({ type: CancelDto, required: false, description: 'no fields; an empty object if sent' })
  @ApiResponse({ status: 202, description: 'cancel accepted', type: CancelResponseDto.Output })
  @ApiErrors({
    400: 'invalid task_id or body',
    404: 'no such task',
    409: '`illegal_state`: the task has already ended (completed, failed or cancelled)',
    413: 'body larger than RUNLEDGER_BODY_LIMIT',
  })
  async cancel(
    @Param('task_id', taskIdPipe) taskId: string,
    @Body(new ZodPipe(CancelBody, 'body')) _body: CancelDto | undefined,
  ): Promise<z.infer<typeof CancelResponse>> {
    await this.runtime.cancel(taskId);
    return { task_id: taskId, status: (await this.requireTask(taskId)).status };
  }

  @Post(':task_id/fork')
  @HttpCode(202)
  @RequireScope('tasks:write')
  @ApiOperation({
    operationId: 'forkTask',
    summary:
      'A new task that continues from one event of this one: its history up to there is reused (recorded model answers and tool outcomes are not asked or run again), the rest runs',
  })
  @ApiTaskId()
  @ApiResponse({ status: 202, description: 'the new task; it runs', type: TaskResponseDto.Output })
  @ApiErrors({
    400: "invalid body: at_sequence not an integer or past the task's last event, or a model this server cannot run",
    404: 'no such task',
    409: "`illegal_state`: the task's content was erased (its session or its task tree), so no fork can reuse it",
    413: 'body larger than RUNLEDGER_BODY_LIMIT',
  })
  async fork(
    @Param('task_id', taskIdPipe) taskId: string,
    @Body(new ZodPipe(ForkTaskBody, 'body')) body: ForkTaskDto,
  ): Promise<TaskResponse> {
    const { task_id } = await this.runtime.fork(taskId, body.at_sequence, {
      model: body.model,
      allow_mutation: body.allow_mutation,
    });
    return toTaskResponse(await this.requireTask(task_id));
  }

  @Post(':task_id/permissions/:request_id')
  @HttpCode(202)
  @RequireScope('approvals')
  @ApiOperation({ operationId: 'resolvePermission', summary: 'Answer a pending permission request' })
  @ApiTaskId()
  @ApiRequestId()
  @ApiResponse({
    status: 202,
    description: 'decision recorded; the task resumes',
    type: ResolutionResponseDto.Output,
  })
  @ApiErrors({
    400: 'invalid ids or body',
    404: 'no such task or request',
    409: 'the request is no longer pending, or its tool call changed',
    413: 'body larger than RUNLEDGER_BODY_LIMIT',
  })
  async resolvePermission(
    @Param('task_id', taskIdPipe) taskId: string,
    @Param('request_id', requestIdPipe) requestId: string,
    @Body(new ZodPipe(ResolvePermissionBody, 'body')) body: ResolvePermissionDto,
  ): Promise<z.infer<typeof ResolutionResponse>> {
    await this.runtime.resolvePermission(taskId, requestId, body.decision, body.content);
    return { task_id: taskId, request_id: requestId, status: (await this.requireTask(taskId)).status };
  }

  @Post(':task_id/secrets/:request_id')
  @HttpCode(202)
  @RequireScope('approvals')
  @ApiOperation({
    operationId: 'provideSecret',
    summary: 'Provide a secret for a pending request (never stored, logged or echoed)',
  })
  @ApiTaskId()
  @ApiRequestId()
  @ApiResponse({
    status: 202,
    description: 'secret handed over; the task resumes',
    type: ResolutionResponseDto.Output,
  })
  @ApiErrors({
    400: 'invalid ids or body',
    404: 'no such task or request',
    409: 'the request is no longer pending',
    413: 'body larger than RUNLEDGER_BODY_LIMIT',
  })
  async provideSecret(
    @Param('task_id', taskIdPipe) taskId: string,
    @Param('request_id', requestIdPipe) requestId: string,
    @Body(new ZodPipe(ProvideSecretBody, 'body')) body: ProvideSecretDto,
  ): Promise<z.infer<typeof ResolutionResponse>> {
    await this.runtime.provideSecret(taskId, requestId, body.secret);
    return { task_id: taskId, request_id: requestId, status: (await this.requireTask(taskId)).status };
  }

  @Post(':task_id/signals/:name')
  @HttpCode(202)
  @RequireScope('tasks:write')
  @ApiOperation({
    operationId: 'sendSignal',
    summary: 'Send a signal to a task: kept in order until a wait_for_signal of its name takes it',
    description:
      'Recorded as SIGNAL_RECEIVED. When the task waits for a signal of this name, the oldest kept one is ' +
      'delivered to the wait (SIGNAL_DELIVERED) and the task runs on; otherwise it is kept for a later wait. ' +
      'The same signal_id is recorded once, whoever sends it and on whichever instance.',
  })
  @ApiTaskId()
  @ApiParam({
    name: 'name',
    required: true,
    description: "the signal's name, as a wait_for_signal names it",
    schema: jsonSchemaOf(SignalName),
  })
  @ApiResponse({ status: 202, description: 'the signal is recorded', type: SignalResponseDto.Output })
  @ApiErrors({
    400: 'invalid task_id, name or body, or a payload over 64 KiB',
    404: 'no such task',
    409: 'the task has ended, or the signal_id was used with another name or payload',
    413: 'body larger than RUNLEDGER_BODY_LIMIT',
  })
  async sendSignal(
    @Param('task_id', taskIdPipe) taskId: string,
    @Param('name', signalNamePipe) name: string,
    @Body(new ZodPipe(SendSignalBody.optional(), 'body')) body: SendSignalDto | undefined,
  ): Promise<z.infer<typeof SignalResponse>> {
    const sent = await this.runtime.sendSignal(taskId, {
      name,
      payload: body?.payload,
      signal_id: body?.signal_id,
    });
    return {
      task_id: sent.task_id,
      signal_id: sent.signal_id,
      name: sent.name,
      created: sent.created,
      taken_by: sent.taken_by,
    };
  }

  private async requireTask(taskId: string) {
    const task = await this.tasks.get(taskId);
    if (!task) throw new NotFoundError(`task ${taskId} not found`, { task_id: taskId });
    return task;
  }
}
