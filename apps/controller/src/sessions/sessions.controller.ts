import { Controller, Get, Inject, Param, Query } from '@nestjs/common';
import { ApiOperation, ApiParam, ApiResponse, ApiTags } from '@nestjs/swagger';
import { NotFoundError } from '@runledger/contracts';
import { TaskViews } from '@runledger/runtime';
import { RequireScope } from '../auth/scopes';
import { ApiErrors, jsonSchemaOf } from '../docs/api-docs';
import {
  SessionIdParam,
  SessionQuery,
  SessionQueryDto,
  SessionResponse,
  SessionResponseDto,
  toSessionTaskResponse,
} from '../dtos/sessions.dto';
import { ZodPipe } from '../dtos/zod.pipe';

@ApiTags('sessions')
@Controller('sessions')
export class SessionsController {
  constructor(@Inject(TaskViews) private readonly tasks: TaskViews) {}

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
    // a later page may be empty; a session none of whose tasks exist does not
    if (page.tasks.length === 0 && query.cursor === undefined)
      throw new NotFoundError(`session ${sessionId} not found`, { session_id: sessionId });
    return {
      session_id: sessionId,
      tasks: page.tasks.map(toSessionTaskResponse),
      next_cursor: page.next_cursor,
    };
  }
}
