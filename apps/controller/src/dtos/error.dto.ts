import { z } from 'zod';

export const ErrorResponse = z.object({
  error: z.string().describe('machine-readable code, e.g. validation_error, not_found, unauthorized'),
  message: z.string(),
  details: z.unknown(),
});
