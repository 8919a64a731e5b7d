import { z } from 'zod';
import { ScheduleSpec } from '@runledger/contracts';
import { createZodDto } from './zod-dto';

/** POST /schedules: a schedule's spec (see docs/time.md#schedules). */
export const CreateScheduleBody = ScheduleSpec;
export class CreateScheduleDto extends createZodDto(CreateScheduleBody) {}

export const ScheduleIdParam = z.string().regex(/^sched_[A-Za-z0-9_-]{1,100}$/, 'not a schedule id');

export const ScheduleResponse = z.object({
  schedule_id: z.string(),
  name: z.string().optional(),
  cron: z.string(),
  time_zone: z.string(),
  input: z.string(),
  session_id: z.string().optional(),
  budgets: z.record(z.string(), z.number()).optional(),
  overlap: ScheduleSpec.shape.overlap.unwrap(),
  catch_up: ScheduleSpec.shape.catch_up.unwrap(),
  created_at: z.string(),
  paused: z.boolean(),
  next_slot: z
    .string()
    .nullable()
    .describe('the next slot; null while paused, or when the expression names no more'),
  last_slot: z.string().nullable(),
  last_outcome: z.enum(['started', 'skipped', 'buffered', 'missed']).nullable(),
  last_task_id: z.string().nullable().describe('the task of the latest started slot'),
  buffered_slot: z
    .string()
    .nullable()
    .describe('a slot waiting for the running task to end (overlap buffer_one)'),
  tasks_started: z.number().int().nonnegative(),
});
export class ScheduleResponseDto extends createZodDto(ScheduleResponse) {}

export const ScheduleListResponse = z.object({ schedules: z.array(ScheduleResponse) });
export class ScheduleListResponseDto extends createZodDto(ScheduleListResponse) {}
