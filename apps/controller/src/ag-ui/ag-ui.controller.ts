import { Body, Controller, Headers, HttpCode, Inject, Post, Req, Res } from '@nestjs/common';
import { ApiBody, ApiHeader, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { RunAgentInput } from '@ag-ui/core';
import type { Request, Response } from 'express';
import { RequireScope } from '../auth/scopes';
import { ApiBackpressure, ApiErrors, jsonSchemaOf } from '../docs/api-docs';
import { ZodPipe, parseOrThrow } from '../dtos/zod.pipe';
import { AgUiRuns } from './ag-ui-runs.service';
import { AgUiStream } from './ag-ui-stream';
import { AgUiLastEventId, RunAgentInputBody } from './ag-ui.dto';

/** AG-UI 1.0: one POST with RunAgentInput, the run's events back as server-sent events. */
@ApiTags('ag-ui')
@Controller('ag-ui')
export class AgUiController {
  constructor(
    @Inject(AgUiRuns) private readonly runs: AgUiRuns,
    @Inject(AgUiStream) private readonly stream: AgUiStream,
  ) {}

  @Post()
  @HttpCode(200)
  @ApiBackpressure()
  @RequireScope('tasks:write')
  @ApiOperation({
    operationId: 'runAgUi',
    summary: 'Run the agent for an AG-UI frontend: RunAgentInput in, AG-UI events out (SSE)',
    description:
      'threadId is the session; runId the idempotency key (the same runId and body stream the same task, ' +
      'a reconnect does not start another); the last user message is the task input; context, ' +
      'forwardedProps and tools are recorded with the task. `resume` entries answer the interrupts of an ' +
      "earlier run (the task's permission and secret requests, by id) and continue its task. Every event " +
      'has an id `<sequence>-<n>` from the log; sending the same body again with Last-Event-ID resumes ' +
      'after it, on any instance, also after a restart. See docs/ag-ui.md.',
  })
  @ApiBody({ schema: jsonSchemaOf(RunAgentInputBody) })
  @ApiHeader({
    name: 'Last-Event-ID',
    required: false,
    description: 'resume the run after this event id (the same body must be sent again)',
    schema: jsonSchemaOf(AgUiLastEventId),
  })
  @ApiResponse({
    status: 200,
    description: 'an event stream of AG-UI events: RUN_STARTED first, RUN_FINISHED or RUN_ERROR last',
    content: { 'text/event-stream': { schema: { type: 'string' } } },
  })
  @ApiErrors({
    400: 'the body is not a valid RunAgentInput, has no user message to run, or a resume entry is invalid; or an invalid Last-Event-ID',
    404: 'a resume entry names a request that does not exist',
    409: 'the runId was used with another body, or an interrupt is no longer pending',
    413: 'body larger than RUNLEDGER_BODY_LIMIT',
  })
  async run(
    @Body(new ZodPipe(RunAgentInputBody, 'body')) input: RunAgentInput,
    @Headers('last-event-id') lastEventIdHeader: unknown,
    @Req() req: Request,
    @Res() res: Response,
  ): Promise<void> {
    const lastEventId = parseOrThrow(AgUiLastEventId, lastEventIdHeader, 'Last-Event-ID header');
    const frame = await this.runs.begin(input);
    await this.stream.write(frame, lastEventId, req, res);
  }
}
