import { createZodDto } from './zod-dto';
import { z } from 'zod';
import { EventTypeSchema, RuntimeEvent, RuntimeEventEnvelope } from '@runledger/contracts';
import { IdParam, queryInt } from './zod.pipe';

export const TaskEventsQuery = z
  .object({
    after_seq: queryInt(0, Number.MAX_SAFE_INTEGER).default(0),
    limit: queryInt(1, 1000).default(100),
  })
  .strict();
export class TaskEventsQueryDto extends createZodDto(TaskEventsQuery) {}

/** SSE: `after_seq` where to start when no Last-Event-ID header is sent. */
export const StreamQuery = z.object({ after_seq: queryInt(0, Number.MAX_SAFE_INTEGER).optional() }).strict();
export class StreamQueryDto extends createZodDto(StreamQuery) {}

/** The Last-Event-ID header an EventSource sends when it reconnects: the last sequence it got. */
export const LastEventId = z
  .string()
  .regex(/^\d{1,15}$/, 'must be an event sequence')
  .transform(Number)
  .optional();

/** `type` may list several types separated by commas. */
export const AdminEventsQuery = z
  .object({
    type: z
      .string()
      .max(2000)
      .transform((s) => s.split(','))
      .pipe(z.array(EventTypeSchema).min(1))
      .optional()
      .describe('one or more event types, comma-separated (TASK_RECEIVED,TASK_COMPLETED)'),
    task_id: IdParam.optional(),
    after_position: queryInt(0, Number.MAX_SAFE_INTEGER).default(0),
    limit: queryInt(1, 1000).default(100),
  })
  .strict();
export class AdminEventsQueryDto extends createZodDto(AdminEventsQuery) {}

export class RuntimeEventDto extends createZodDto(RuntimeEventEnvelope) {}

export const TaskEventsResponse = z.object({
  events: z.array(RuntimeEventEnvelope),
  next_after_seq: z.number().int(),
});
export class TaskEventsResponseDto extends createZodDto(TaskEventsResponse) {}
/** A stretch of the log whose events of these tasks were moved to the archive (docs/retention.md). */
export const ArchivedRangeSchema = z.object({
  segment_id: z.string(),
  first_position: z.number().int(),
  last_position: z.number().int(),
  event_count: z.number().int().describe('events of the range that are archived; the others are live'),
  task_ids: z.array(z.string()).describe('read them through GET /tasks/{task_id}/events'),
});

export const AdminEventsResponse = z.object({
  events: z.array(RuntimeEventEnvelope),
  next_after_position: z
    .number()
    .int()
    .describe(
      "the next page's after_position: the page covered the log through it (the head read before it, unless the page is full), archived stretches included",
    ),
  head_position: z.number().int(),
  archived: z
    .array(ArchivedRangeSchema)
    .describe(
      'archived stretches between after_position and next_after_position (at most 100; the page ends before an untold one): positions missing there were archived, not lost',
    ),
});
export class AdminEventsResponseDto extends createZodDto(AdminEventsResponse) {}

export const toTaskEventsResponse = (events: RuntimeEvent[], afterSeq: number) => ({
  events,
  next_after_seq: events.length ? events[events.length - 1].sequence : afterSeq,
});
