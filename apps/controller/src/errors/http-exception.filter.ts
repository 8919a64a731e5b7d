import { ArgumentsHost, Catch, ExceptionFilter, Inject } from '@nestjs/common';
import type { Request, Response } from 'express';
import { Logger } from 'pino';
import { bearerChallenge, originOf } from '../auth/protected-resource';
import { LOGGER } from '../tokens';
import { retryAfterOf, toErrorResponse } from './error-body';
import { methodNotAllowed } from './method-not-allowed';

/** The single HTTP exception filter: every error is `{error, message, details}`. */
@Catch()
export class HttpExceptionFilter implements ExceptionFilter {
  constructor(@Inject(LOGGER) private readonly log: Logger) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    if (host.getType() !== 'http') return;
    const res = host.switchToHttp().getResponse<Response>();
    const req = host.switchToHttp().getRequest<Request>();
    const wrongMethod = methodNotAllowed(exception, req);
    if (wrongMethod && !res.headersSent) {
      res.setHeader('Allow', wrongMethod.allow.join(', '));
      res.status(405).json(wrongMethod.body);
      return;
    }
    const { status, body, fault } = toErrorResponse(exception);
    // the request's correlation id (RequestLogMiddleware set it on the response) ties this line to its request line
    if (fault)
      this.log.error(
        { err: exception, correlation_id: res.getHeader('X-Correlation-Id') ?? null },
        'unhandled error',
      );
    if (res.headersSent) {
      // a stream (SSE) already started: the status can no longer change
      res.end();
      return;
    }
    // a webhook's 401 is its signature's, not a bearer token's
    if (status === 401 && !req.originalUrl.startsWith('/hooks/'))
      res.setHeader(
        'WWW-Authenticate',
        bearerChallenge(
          originOf({ host: req.headers.host, secure: req.protocol === 'https' }),
          req.headers.authorization !== undefined,
        ),
      );
    const retryAfter = retryAfterOf(exception);
    if (retryAfter !== null) res.setHeader('Retry-After', String(retryAfter));
    res.status(status).json(body);
  }
}
