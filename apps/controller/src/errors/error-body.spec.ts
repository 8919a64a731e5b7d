import { NotFoundException, PayloadTooLargeException } from '@nestjs/common';
import { ThrottlerException } from '@nestjs/throttler';
import { z } from 'zod';
import {
  ConcurrencyError,
  IdempotencyConflictError,
  IllegalStateError,
  NotFoundError,
  OverloadedError,
  QueueFullError,
  ValidationError,
} from '@runledger/contracts';
import { retryAfterOf, toErrorResponse } from './error-body';

describe('toErrorResponse', () => {
  it.each<[unknown, number, string]>([
    [new ValidationError('bad'), 400, 'validation_error'],
    [new NotFoundError('gone'), 404, 'not_found'],
    [new ConcurrencyError('t', 1, 2), 409, 'concurrency_error'],
    [new IllegalStateError('not pending'), 409, 'illegal_state'],
    [new IdempotencyConflictError('other body'), 409, 'idempotency_conflict'],
    [z.object({ a: z.string() }).safeParse({}).error, 400, 'validation_error'],
    [new PayloadTooLargeException(), 413, 'payload_too_large'],
    [new NotFoundException(), 404, 'not_found'],
    [new ThrottlerException(), 429, 'rate_limited'],
    [new QueueFullError('queue full', 1, {}), 429, 'queue_full'],
    [new OverloadedError('saturated', 1, {}), 503, 'overloaded'],
  ])('maps %o to %i %s', (err, status, error) => {
    const sut = toErrorResponse(err);
    expect(sut).toMatchObject({ status, fault: false, body: { error } });
    expect(typeof sut.body.message).toBe('string');
  });

  it('names when to retry a refusal under load, in the details and for the Retry-After header', () => {
    const sut = new OverloadedError('saturated', 2, { loop_delay_ms: 300 });
    expect(toErrorResponse(sut).body.details).toEqual({ loop_delay_ms: 300, retry_after_s: 2 });
    expect(retryAfterOf(sut)).toBe(2);
    expect(retryAfterOf(new ValidationError('bad'))).toBeNull();
  });

  it('hides the message of an unexpected fault', () => {
    expect(toErrorResponse(new Error('db password is hunter2'))).toEqual({
      status: 500,
      fault: true,
      body: { error: 'internal_error', message: 'internal error', details: null },
    });
  });
});
