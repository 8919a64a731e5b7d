import { z } from 'zod';
import { EventPayloads } from '@runledger/contracts';
import { HOOK_SIGNATURE_STYLES, HookSignalAction, HookTaskAction } from '../hooks/hook-config';
import { createZodDto } from './zod-dto';

export const HookNameParam = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$/, 'not a hook name');

/** POST /hooks/:name: what the delivery came to. */
export const HookReceiptResponse = EventPayloads.HOOK_RECEIVED.extend({
  duplicate: z
    .boolean()
    .describe(
      'true: this delivery id was received before; this copy was answered from its record and did nothing',
    ),
});
export class HookReceiptResponseDto extends createZodDto(HookReceiptResponse) {}

/** GET /hooks: the configured hooks, never their secrets. */
export const HookResponse = z.object({
  name: z.string(),
  signature: z.union([
    z.enum(HOOK_SIGNATURE_STYLES),
    z.object({
      header: z.string(),
      algorithm: z.enum(['sha256', 'sha1', 'sha512']),
      encoding: z.enum(['hex', 'base64']),
      prefix: z.string(),
    }),
  ]),
  signature_header: z.string(),
  secret_env: z.string().describe('the environment variable the secret was read from (never the secret)'),
  tolerance_s: z.number().int(),
  delivery_header: z.string().nullable(),
  when: z.record(z.string(), z.union([z.string(), z.array(z.string())])).nullable(),
  task: HookTaskAction.nullable(),
  signal: HookSignalAction.nullable(),
});
export const HookListResponse = z.object({ hooks: z.array(HookResponse) });
export class HookListResponseDto extends createZodDto(HookListResponse) {}
