import { createZodDto } from './zod-dto';
import { z } from 'zod';
import { StopReason } from '@runledger/contracts';
import { queryInt } from './zod.pipe';

export const StatsQuery = z
  .object({
    days: queryInt(1, 90)
      .default(7)
      .describe('how many days back from now the figures cover (1-90, default 7)'),
  })
  .strict();
export type StatsQuery = z.output<typeof StatsQuery>;
export class StatsQueryDto extends createZodDto(StatsQuery) {}

const Percentiles = {
  tasks: z.number().int().nonnegative(),
  p50_ms: z.number().int().nonnegative().nullable().describe('median duration; null without tasks'),
  p95_ms: z
    .number()
    .int()
    .nonnegative()
    .nullable()
    .describe('95th percentile (nearest rank); null without tasks'),
};

export const StatsResponse = z.object({
  since: z.string().describe('start of the window (ISO time)'),
  until: z.string().describe('end of the window: when the figures were read'),
  tasks_per_hour: z
    .array(
      z.object({
        hour: z.string().describe('the UTC hour the tasks ended in, e.g. 2026-01-01T13:00:00.000Z'),
        stop_reason: StopReason.nullable(),
        tasks: z.number().int().positive(),
      }),
    )
    .describe('ended tasks per hour and stop reason, hours with none left out'),
  usage_per_day: z
    .array(
      z.object({
        day: z.string().describe('UTC day, YYYY-MM-DD'),
        model: z.string(),
        model_calls: z.number().int().nonnegative(),
        prompt_tokens: z.number().int().nonnegative(),
        completion_tokens: z.number().int().nonnegative(),
        total_tokens: z.number().int().nonnegative(),
        cost_usd: z.number().nonnegative(),
      }),
    )
    .describe('model answers per UTC day and model (MODEL_RESPONDED events)'),
  duration: z.object(Percentiles).describe('duration of the tasks that ended in the window'),
  duration_per_day: z
    .array(z.object({ day: z.string(), ...Percentiles }))
    .describe('the same per UTC day the tasks ended on, days with none left out'),
});
export type StatsResponse = z.infer<typeof StatsResponse>;
export class StatsResponseDto extends createZodDto(StatsResponse) {}
