import { Body, Controller, Get, HttpCode, Inject, Param, Post, Put, Query } from '@nestjs/common';
import { ApiOperation, ApiParam, ApiResponse, ApiTags } from '@nestjs/swagger';
import { NotFoundError } from '@runledger/contracts';
import { MemoryService } from '@runledger/memory';
import { RuntimeController, TaskViews } from '@runledger/runtime';
import { Erasure } from '@runledger/state-store';
import { RequireScope } from '../auth/scopes';
import { ApiErrors, jsonSchemaOf } from '../docs/api-docs';
import {
  ConfigureSessionBody,
  ConfigureSessionDto,
  SessionBudgetBody,
  SessionBudgetDto,
  SessionBudgetResponse,
  SessionBudgetResponseDto,
  SessionIdParam,
  SessionSettingsResponse,
  SessionSettingsResponseDto,
  SessionQuery,
  SessionQueryDto,
  SessionResponse,
  SessionResponseDto,
  toSessionTaskResponse,
} from '../dtos/sessions.dto';
import { SessionErasureResponseDto } from '../dtos/erasure.dto';
import { ZodPipe } from '../dtos/zod.pipe';
import { SessionErasureResult, eraseSession } from './erase-session';

@ApiTags('sessions')
@Controller('sessions')
export class SessionsController {
  constructor(
    @Inject(TaskViews) private readonly tasks: TaskViews,
    @Inject(RuntimeController) private readonly runtime: RuntimeController,
    @Inject(Erasure) private readonly erasure: Erasure,
    @Inject(MemoryService) private readonly memory: MemoryService | null,
  ) {}

  @Post(':session_id/erase')
  @HttpCode(200)
  @RequireScope('admin')
  @ApiOperation({
    operationId: 'eraseSession',
    summary: "Forget a session's content: its data key is destroyed (crypto-shredding)",
    description:
      'Destroys the data keys of every task tree of the session and its own. Every finished task of the session keeps its events, ids, statuses and usage; their personal fields ' +
      '(input, answers, tool arguments and outputs, model replies) read as "[erased]" everywhere from now on, ' +
      'with `$erased` in the payload. Task rows are refolded, checkpoints deleted, memory entries forgotten, ' +
      'SESSION_ERASED recorded in `system:erasure`. The session takes no more tasks. Refused (409) while a ' +
      'task of it is not finished. See docs/retention.md#erasure.',
  })
  @ApiParam({ name: 'session_id', schema: jsonSchemaOf(SessionIdParam) })
  @ApiResponse({ status: 200, description: 'what was erased', type: SessionErasureResponseDto.Output })
  @ApiErrors({
    400: 'invalid session_id (or a system stream)',
    403: 'the token lacks the admin scope',
    404: 'no task has this session_id',
    409: 'a task of the session is not finished',
  })
  erase(
    @Param('session_id', new ZodPipe(SessionIdParam, 'session_id')) sessionId: string,
  ): Promise<SessionErasureResult> {
    return eraseSession(this.erasure, this.memory, sessionId);
  }

  @Get(':session_id')
  @RequireScope('tasks:read')
  @ApiOperation({
    operationId: 'getSession',
    summary: "A session's tasks (its conversation), newest first, cursor paginated",
  })
  @ApiParam({
    name: 'session_id',
    description: 'the session_id the tasks were submitted with',
    schema: jsonSchemaOf(SessionIdParam),
  })
  @ApiResponse({ status: 200, description: "a page of the session's tasks", type: SessionResponseDto.Output })
  @ApiErrors({ 400: 'invalid session_id or query', 404: 'no task has this session_id' })
  async get(
    @Param('session_id', new ZodPipe(SessionIdParam, 'session_id')) sessionId: string,
    @Query(new ZodPipe(SessionQuery, 'query')) query: SessionQueryDto,
  ): Promise<SessionResponse> {
    const page = await this.tasks.list({ ...query, session_id: sessionId });
    const on_busy = await this.runtime.sessionStrategy(sessionId);
    const budget = await this.runtime.sessionBudget(sessionId);
    // a later page may be empty; a session none of whose tasks exist (nor its settings) does not
    if (page.tasks.length === 0 && query.cursor === undefined && on_busy === null && budget === null)
      throw new NotFoundError(`session ${sessionId} not found`, { session_id: sessionId });
    return {
      session_id: sessionId,
      on_busy,
      tasks: page.tasks.map(toSessionTaskResponse),
      next_cursor: page.next_cursor,
      budget,
    };
  }

  @Put(':session_id')
  @RequireScope('tasks:write')
  @ApiOperation({
    operationId: 'configureSession',
    summary: "Set the session's strategy for a message that arrives while a task of it is unfinished",
    description:
      'enqueue (default): the new task runs once the unfinished ones ended; reject: 409 session_busy naming the task; ' +
      'interrupt: the unfinished tasks stop at their next safe point (stop reason interrupted) and the new one runs after, with them in its history; ' +
      'rollback: they are cancelled and left out of the history, then the new one runs. A POST /tasks may name its own (on_busy). ' +
      'The session need not have tasks yet; see docs/time.md.',
  })
  @ApiParam({ name: 'session_id', schema: jsonSchemaOf(SessionIdParam) })
  @ApiResponse({ status: 200, description: 'recorded', type: SessionSettingsResponseDto.Output })
  @ApiErrors({ 400: 'invalid session_id or body' })
  async configure(
    @Param('session_id', new ZodPipe(SessionIdParam, 'session_id')) sessionId: string,
    @Body(new ZodPipe(ConfigureSessionBody, 'body')) body: ConfigureSessionDto,
  ): Promise<SessionSettingsResponse> {
    await this.runtime.configureSession(sessionId, body.on_busy);
    return { session_id: sessionId, on_busy: body.on_busy };
  }

  @Put(':session_id/budget')
  @RequireScope('tasks:write')
  @ApiOperation({
    operationId: 'setSessionBudget',
    summary:
      "Set the session's own token and cost budget across its tasks: tasks received from now on run under it, before any limit a task named (a session need not have tasks yet)",
  })
  @ApiParam({
    name: 'session_id',
    description: 'the session_id its tasks are (or will be) submitted with',
    schema: jsonSchemaOf(SessionIdParam),
  })
  @ApiResponse({
    status: 200,
    description: "the session's budget as a task received now would record it",
    type: SessionBudgetResponseDto.Output,
  })
  @ApiErrors({ 400: 'invalid session_id or body (at least one of max_tokens, max_cost_usd)' })
  async setBudget(
    @Param('session_id', new ZodPipe(SessionIdParam, 'session_id')) sessionId: string,
    @Body(new ZodPipe(SessionBudgetBody, 'body')) body: SessionBudgetDto,
  ): Promise<SessionBudgetResponse> {
    return { session_id: sessionId, budget: await this.runtime.setSessionBudget(sessionId, body) };
  }
}
