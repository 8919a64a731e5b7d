import { randomUUID } from 'node:crypto';
import { Inject, Injectable, NestMiddleware } from '@nestjs/common';
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from 'pino';
import { AuthenticatedRequest } from '../auth/auth.guard';
import { requestRoute } from '../metrics/request-route';
import { LOGGER } from '../tokens';

const CORRELATION = /^[A-Za-z0-9_.:-]{1,100}$/;
const TASK_PATH = /^\/tasks\/([A-Za-z0-9_.:-]{1,200})(?:\/|$)/;

/** The level of the request lines. */
const REQUEST_LINE_LEVEL = 'info';

/** the caller's X-Correlation-Id when it is a plain token, else a new one; echoed on the response */
function correlationId(req: Request, res: Response): string {
  const header = req.headers['x-correlation-id'];
  const id = typeof header === 'string' && CORRELATION.test(header) ? header : randomUUID();
  res.setHeader('X-Correlation-Id', id);
  return id;
}

/**
 * What a request line records: the path without the query string, the route pattern, the token's
 * name (never the token), never a header or body. `aborted` marks a response the client dropped
 * before it ended (an SSE stream closed by the browser).
 */
function requestFields(req: Request, res: Response, durationMs: number) {
  return {
    method: req.method,
    path: req.path,
    route: requestRoute(req),
    status: res.statusCode,
    duration_ms: durationMs,
    aborted: !res.writableEnded,
    task_id: TASK_PATH.exec(req.path)?.[1] ?? null,
    client: (req as unknown as AuthenticatedRequest).principal?.name ?? null,
  };
}

/**
 * One 'request' line per response once it closed (ended, or dropped by the client), with the
 * request's correlation id, which the response echoes. It costs a request only what the line needs:
 * no logger of its own, no context carried through the request's promises (an AsyncLocalStorage
 * would make every await of the process about three times dearer), and below the line's level
 * (LOG_LEVEL=warn) the line's fields are not gathered at all.
 */
@Injectable()
export class RequestLogMiddleware implements NestMiddleware {
  constructor(@Inject(LOGGER) private readonly log: Logger) {}

  use(req: Request, res: Response, next: NextFunction): void {
    const correlation_id = correlationId(req, res);
    const started = Date.now();
    let emitted: unknown = null;
    res.once('error', (err: unknown) => (emitted = err));
    res.once('close', () => {
      if (!this.log.isLevelEnabled(REQUEST_LINE_LEVEL)) return;
      const fields = { correlation_id, ...requestFields(req, res, Date.now() - started) };
      // only an error the response itself emitted is news here: a 5xx's cause is logged where it arose
      this.log[REQUEST_LINE_LEVEL](emitted ? { ...fields, err: emitted } : fields, 'request');
    });
    next();
  }
}
