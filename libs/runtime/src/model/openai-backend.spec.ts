import { APIError } from 'openai';
import { ModelErrorKind } from './model-backend';
import { toModelCallError } from './openai-compatible';

/** An error as the openai client raises it: from an HTTP status, or (status undefined) from `data: {"error": ...}` inside a stream. */
const apiError = (status: number | undefined, body: Record<string, unknown>) =>
  new APIError(status, body, String(body.message ?? 'error'), new Headers());

describe('toModelCallError', () => {
  it.each<[string, APIError, ModelErrorKind]>([
    ['HTTP 429', apiError(429, { message: 'slow down' }), 'rate_limited'],
    ['HTTP 401', apiError(401, { message: 'bad key' }), 'authentication_error'],
    ['HTTP 500', apiError(500, { message: 'boom' }), 'provider_error'],
    [
      'in-stream rate_limit_exceeded code',
      apiError(undefined, { code: 'rate_limit_exceeded' }),
      'rate_limited',
    ],
    ['in-stream rate limit by type', apiError(undefined, { type: 'rate_limit_error' }), 'rate_limited'],
    [
      'in-stream invalid_api_key',
      apiError(undefined, { code: 'invalid_api_key', type: 'invalid_request_error' }),
      'authentication_error',
    ],
    ['in-stream status 429 in the body', apiError(undefined, { status: 429, message: 'x' }), 'rate_limited'],
    ['in-stream status "401" as a code', apiError(undefined, { code: '401' }), 'authentication_error'],
    [
      'in-stream server error',
      apiError(undefined, { type: 'server_error', message: 'overloaded' }),
      'provider_error',
    ],
  ])('%s', (_name, err, kind) => {
    expect(toModelCallError(err, 1000).kind).toBe(kind);
  });
});
