import { HttpException } from '@nestjs/common';
import { ZodError } from 'zod';
import { BackpressureError, RunledgerError } from '@runledger/contracts';

/** The one error shape of the API, over HTTP and WebSocket. */
export interface ErrorBody {
  error: string;
  message: string;
  details: unknown;
}

const STATUS_BY_CODE: Record<string, number> = {
  validation_error: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  concurrency_error: 409,
  illegal_state: 409,
  idempotency_conflict: 409,
  session_busy: 409,
  lease_lost: 409,
  queue_full: 429,
  overloaded: 503,
};

const CODE_BY_STATUS: Record<number, string> = {
  400: 'validation_error',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  405: 'method_not_allowed',
  409: 'conflict',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  429: 'rate_limited',
};

export const zodIssues = (e: ZodError) =>
  e.issues.map((i) => ({ path: i.path.map(String).join('.'), code: i.code, message: i.message }));

/** Seconds a client should wait before trying again (the Retry-After header), when the error says. */
export const retryAfterOf = (err: unknown): number | null =>
  err instanceof BackpressureError ? err.retryAfterSeconds : null;

/**
 * Map anything thrown to a status and the error body. Only unknown faults are
 * 500, and their message is not shown: bad input always lands in a 4xx branch
 * (and a saturated server in a 429 or 503 with Retry-After).
 */
export function toErrorResponse(err: unknown): { status: number; body: ErrorBody; fault: boolean } {
  if (err instanceof RunledgerError) {
    const status = STATUS_BY_CODE[err.code];
    if (status)
      return {
        status,
        body: { error: err.code, message: err.message, details: err.details ?? null },
        fault: false,
      };
  }
  if (err instanceof ZodError) {
    const issues = zodIssues(err);
    return {
      status: 400,
      body: {
        error: 'validation_error',
        message: issues.map((i) => `${i.path || '(root)'}: ${i.message}`).join('; '),
        details: { issues },
      },
      fault: false,
    };
  }
  if (err instanceof HttpException) {
    const status = err.getStatus();
    if (status < 500) {
      return {
        status,
        body: {
          error: CODE_BY_STATUS[status] ?? `http_${status}`,
          message: httpMessage(err, status),
          details: null,
        },
        fault: false,
      };
    }
  }
  if (isClientHttpError(err)) {
    const status = err.statusCode;
    return {
      status,
      body: {
        error: CODE_BY_STATUS[status] ?? `http_${status}`,
        message: status === 413 ? 'request body too large' : err.message,
        details: null,
      },
      fault: false,
    };
  }
  return {
    status: 500,
    body: { error: 'internal_error', message: 'internal error', details: null },
    fault: true,
  };
}

/** http-errors objects (body-parser: 413 too large, 415 charset or encoding, 400 bad encoding) marked safe to expose. */
function isClientHttpError(err: unknown): err is { statusCode: number; message: string } {
  const e = err as { statusCode?: unknown; expose?: unknown; message?: unknown } | null;
  return (
    typeof e === 'object' &&
    e !== null &&
    typeof e.statusCode === 'number' &&
    e.statusCode >= 400 &&
    e.statusCode < 500 &&
    e.expose === true &&
    typeof e.message === 'string'
  );
}

function httpMessage(err: HttpException, status: number): string {
  if (status === 413) return 'request body too large';
  if (status === 404) return 'no such route';
  const res = err.getResponse();
  if (typeof res === 'string') return res;
  const msg = (res as { message?: unknown }).message;
  return typeof msg === 'string' ? msg : Array.isArray(msg) ? msg.join('; ') : err.message;
}
