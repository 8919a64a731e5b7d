import { Body, Controller, Delete, Get, HttpCode, Inject, Param, Post } from '@nestjs/common';
import { ApiOperation, ApiParam, ApiResponse, ApiTags } from '@nestjs/swagger';
import { ScheduleView, Scheduler } from '@runledger/runtime';
import { RequireScope } from '../auth/scopes';
import { ApiErrors, jsonSchemaOf } from '../docs/api-docs';
import {
  CreateScheduleBody,
  CreateScheduleDto,
  ScheduleIdParam,
  ScheduleListResponseDto,
  ScheduleResponseDto,
} from '../dtos/schedules.dto';
import { ZodPipe } from '../dtos/zod.pipe';

const IdParam = () => new ZodPipe(ScheduleIdParam, 'schedule_id');
const ApiScheduleId = () => ApiParam({ name: 'schedule_id', schema: jsonSchemaOf(ScheduleIdParam) });

/** Schedules: cron slots that submit tasks, recorded in the stream system:schedules (see docs/time.md#schedules). */
@ApiTags('schedules')
@Controller('schedules')
export class SchedulesController {
  constructor(@Inject(Scheduler) private readonly schedules: Scheduler) {}

  @Post()
  @HttpCode(201)
  @RequireScope('tasks:write')
  @ApiOperation({
    operationId: 'createSchedule',
    summary: 'Create a schedule: each slot of its cron expression (in its time zone) submits a task',
    description:
      'cron: 5 fields, or 6 with seconds first; overlap skip|buffer_one|allow; catch_up skip|run_once. ' +
      "A slot's task has the idempotency key schedule:<schedule_id>:<slot>, so a slot starts one task across instances and restarts.",
  })
  @ApiResponse({ status: 201, description: 'recorded', type: ScheduleResponseDto.Output })
  @ApiErrors({ 400: 'invalid body, cron expression or time zone' })
  create(@Body(new ZodPipe(CreateScheduleBody, 'body')) body: CreateScheduleDto): Promise<ScheduleView> {
    return this.schedules.create(body);
  }

  @Get()
  @RequireScope('tasks:read')
  @ApiOperation({ operationId: 'listSchedules', summary: 'Every schedule not deleted, oldest first' })
  @ApiResponse({ status: 200, description: 'the schedules', type: ScheduleListResponseDto.Output })
  async list(): Promise<{ schedules: ScheduleView[] }> {
    return { schedules: await this.schedules.list() };
  }

  @Get(':schedule_id')
  @RequireScope('tasks:read')
  @ApiScheduleId()
  @ApiOperation({ operationId: 'getSchedule', summary: 'A schedule, its next slot and its latest firing' })
  @ApiResponse({ status: 200, description: 'the schedule', type: ScheduleResponseDto.Output })
  @ApiErrors({ 400: 'invalid schedule_id', 404: 'no such schedule' })
  get(@Param('schedule_id', IdParam()) id: string): Promise<ScheduleView> {
    return this.schedules.get(id);
  }

  @Post(':schedule_id/pause')
  @HttpCode(200)
  @RequireScope('tasks:write')
  @ApiScheduleId()
  @ApiOperation({
    operationId: 'pauseSchedule',
    summary: 'Pause a schedule: no slot fires until it is resumed',
  })
  @ApiResponse({ status: 200, description: 'paused', type: ScheduleResponseDto.Output })
  @ApiErrors({ 400: 'invalid schedule_id', 404: 'no such schedule' })
  pause(@Param('schedule_id', IdParam()) id: string): Promise<ScheduleView> {
    return this.schedules.pause(id, true);
  }

  @Post(':schedule_id/resume')
  @HttpCode(200)
  @RequireScope('tasks:write')
  @ApiScheduleId()
  @ApiOperation({
    operationId: 'resumeSchedule',
    summary: 'Resume a paused schedule (the slots it missed follow its catch-up policy)',
  })
  @ApiResponse({ status: 200, description: 'resumed', type: ScheduleResponseDto.Output })
  @ApiErrors({ 400: 'invalid schedule_id', 404: 'no such schedule' })
  resume(@Param('schedule_id', IdParam()) id: string): Promise<ScheduleView> {
    return this.schedules.pause(id, false);
  }

  @Delete(':schedule_id')
  @HttpCode(204)
  @RequireScope('tasks:write')
  @ApiScheduleId()
  @ApiOperation({ operationId: 'deleteSchedule', summary: 'Delete a schedule (its tasks stay)' })
  @ApiResponse({ status: 204, description: 'deleted' })
  @ApiErrors({ 400: 'invalid schedule_id', 404: 'no such schedule' })
  async delete(@Param('schedule_id', IdParam()) id: string): Promise<void> {
    await this.schedules.delete(id);
  }
}
