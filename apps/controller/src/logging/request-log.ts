import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Request } from 'express';
import type { Params } from 'nestjs-pino';
import type { Logger } from 'pino';
import type { Options } from 'pino-http';
import { AuthenticatedRequest } from '../auth/auth.guard';
import { requestRoute } from '../metrics/request-route';

const CORRELATION = /^[A-Za-z0-9_.:-]{1,100}$/;
const TASK_PATH = /^\/tasks\/([A-Za-z0-9_.:-]{1,200})(?:\/|$)/;

/** the caller's X-Correlation-Id when it is a plain token, else a new one; echoed on the response */
function correlationId(req: IncomingMessage, res: ServerResponse): string {
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
function requestFields(incoming: IncomingMessage, res: ServerResponse, responseTimeMs: number) {
  const req = incoming as Request;
  return {
    method: req.method,
    path: req.path,
    route: requestRoute(req),
    status: res.statusCode,
    duration_ms: responseTimeMs,
    aborted: !res.writableEnded,
    task_id: TASK_PATH.exec(req.path)?.[1] ?? null,
    client: (req as unknown as AuthenticatedRequest).principal?.name ?? null,
  };
}

/** The level of the request lines. */
const REQUEST_LINE_LEVEL = 'info';

/**
 * pino-http over the app's own pino instance: one 'request' line per response, once it ended or was
 * dropped, bound to correlation_id like every line logged while serving it.
 *
 * Per request it costs only what the line needs: the request line carries its own fields (never the
 * `req` object), so the logger pino-http binds `req` to is never used and `req` is not serialized
 * for it (with the redaction that entails); and below the line's level (LOG_LEVEL=warn) the line's
 * fields are not gathered at all. A refused submission costs half an accepted one: under overload
 * this is time given back to the accepted ones.
 */
export function requestLogOptions(logger: Logger): Options {
  return {
    logger,
    genReqId: correlationId,
    customAttributeKeys: { reqId: 'correlation_id' },
    quietReqLogger: true,
    quietResLogger: true,
    wrapSerializers: false,
    serializers: { req: () => undefined },
    customLogLevel: () => (logger.isLevelEnabled(REQUEST_LINE_LEVEL) ? REQUEST_LINE_LEVEL : 'silent'),
    customSuccessMessage: () => 'request',
    customErrorMessage: () => 'request',
    customSuccessObject: (req, res, { responseTime }: { responseTime: number }) =>
      requestFields(req, res, responseTime),
    customErrorObject: (req, res, err, { responseTime }: { responseTime: number }) => ({
      ...requestFields(req, res, responseTime),
      // a 5xx status becomes an Error of pino-http's own making; only an error the response emitted is news
      ...(res.statusCode >= 500 ? {} : { err }),
    }),
  };
}

export function requestLogParams(logger: Logger, forRoutes: NonNullable<Params['forRoutes']>): Params {
  return { pinoHttp: requestLogOptions(logger), forRoutes };
}
