import { z } from 'zod';
import { createZodDto } from './zod-dto';
import { IdParam } from './zod.pipe';

/** A signal for a task: its payload (any JSON), and the sender's id for it so a retry is recorded once. */
export const SendSignalBody = z
  .object({
    payload: z.unknown().optional().describe('any JSON value (at most 64 KiB); absent: null'),
    signal_id: IdParam.optional().describe(
      "the sender's id for this signal: sent again, it is recorded once (with another name or payload: 409)",
    ),
  })
  .strict();
export class SendSignalDto extends createZodDto(SendSignalBody) {}

export const SignalResponse = z.object({
  task_id: z.string(),
  signal_id: z.string(),
  name: z.string(),
  /** false: a signal with this id was already recorded, and this one was not recorded again */
  created: z.boolean(),
  /** the wait that took the signal; null while it is kept for a later wait */
  taken_by: z.string().nullable(),
});
export class SignalResponseDto extends createZodDto(SignalResponse) {}
