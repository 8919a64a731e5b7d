import { createZodDto } from './zod-dto';
import { z } from 'zod';
import type { HealthResponse } from '../health/health.service';

/** GET /health, the same object with 200 (ok) and 503 (degraded). */
export const HealthResponseSchema = z.object({
  status: z.enum(['ok', 'degraded']),
  db: z.enum(['reachable', 'unreachable']),
  migrations: z.enum(['current', 'pending', 'unknown']),
  sandbox: z
    .string()
    .nullable()
    .describe('the sandbox shell commands run in (bwrap, process), null if unknown'),
  memory: z
    .object({
      index: z
        .enum(['ready', 'rebuilding'])
        .describe(
          'rebuilding: a worker thread rebuilds the vector index file; recall scans exactly meanwhile',
        ),
      rebuilt_because: z
        .string()
        .nullable()
        .describe('why the index file was rebuilt at boot (missing, corrupt, ...); null when it was used'),
    })
    .nullable()
    .describe('the vector index of memory; null when memory is off'),
  warnings: z.array(z.string()),
}) satisfies z.ZodType<HealthResponse>;
export class HealthResponseDto extends createZodDto(HealthResponseSchema) {}
