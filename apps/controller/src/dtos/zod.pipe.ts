import { PipeTransform } from '@nestjs/common';
import { z } from 'zod';
import { ValidationError } from '@runledger/contracts';
import { zodIssues } from '../errors/error-body';

/** Parse with zod or throw a ValidationError naming every issue (never echoing the input). */
export function parseOrThrow<S extends z.ZodType>(schema: S, value: unknown, where: string): z.output<S> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issues = zodIssues(parsed.error);
  throw new ValidationError(
    `invalid ${where}: ${issues.map((i) => `${i.path || '(root)'}: ${i.message}`).join('; ')}`,
    { issues },
  );
}

export class ZodPipe<S extends z.ZodType> implements PipeTransform<unknown, z.output<S>> {
  constructor(
    private readonly schema: S,
    private readonly where: string,
  ) {}

  transform(value: unknown): z.output<S> {
    return parseOrThrow(this.schema, value, this.where);
  }
}

/**
 * A non-negative decimal integer in a query string ('12'), nothing looser. The
 * meta makes the OpenAPI document show it as the integer range it is (the query
 * string carries it as digits, which the pattern states).
 */
export const queryInt = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d{1,15}$/, 'must be a decimal integer')
    .transform(Number)
    .pipe(z.number().int().min(min).max(max))
    .meta({ type: 'integer', minimum: min, maximum: max });

/**
 * Ids in paths: task_..., perm_..., opaque but bounded. `.` and `..` are not
 * ids: clients resolve them as path segments (`/tasks/.` is sent as `/tasks/`).
 */
export const IdParam = z
  .string()
  .regex(/^(?!\.\.?$)[A-Za-z0-9_.:-]{1,200}$/, 'must be 1-200 characters of [A-Za-z0-9_.:-], not . or ..');
