import { z } from 'zod';
import { EventTypeSchema, RuntimeEvent, RuntimeEventEnvelope } from '@runledger/contracts';
import { IdParam, queryInt } from './zod.pipe';

export const TaskEventsQuery = z
  .object({
    after_seq: queryInt(0, Number.MAX_SAFE_INTEGER).default(0),
    limit: queryInt(1, 1000).default(100),
  })
  .strict();

/** `type` may list several types separated by commas. */
export const AdminEventsQuery = z
  .object({
    type: z
      .string()
      .max(2000)
      .transform((s) => s.split(','))
      .pipe(z.array(EventTypeSchema).min(1))
      .optional(),
    task_id: IdParam.optional(),
    after_position: queryInt(0, Number.MAX_SAFE_INTEGER).default(0),
    limit: queryInt(1, 1000).default(100),
  })
  .strict();

export const TaskEventsResponse = z.object({
  events: z.array(RuntimeEventEnvelope),
  next_after_seq: z.number().int(),
});
export const AdminEventsResponse = z.object({
  events: z.array(RuntimeEventEnvelope),
  next_after_position: z.number().int(),
  head_position: z.number().int(),
});

export const toTaskEventsResponse = (events: RuntimeEvent[], afterSeq: number) => ({
  events,
  next_after_seq: events.length ? events[events.length - 1].sequence : afterSeq,
});

export const toAdminEventsResponse = (
  events: RuntimeEvent[],
  afterPosition: number,
  headPosition: number,
) => ({
  events,
  next_after_position: events.length ? events[events.length - 1].position : afterPosition,
  head_position: headPosition,
});
