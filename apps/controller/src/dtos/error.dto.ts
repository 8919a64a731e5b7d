import { createZodDto } from './zod-dto';
import { z } from 'zod';

/** The one error body of the API (errors/error-body.ts builds it). */
export const ErrorResponse = z.object({
  error: z.string().describe('machine-readable code, e.g. validation_error, not_found, unauthorized'),
  message: z.string(),
  details: z.unknown().describe('what the code needs to explain itself (e.g. {issues}), or null'),
});
export class ErrorResponseDto extends createZodDto(ErrorResponse) {}
