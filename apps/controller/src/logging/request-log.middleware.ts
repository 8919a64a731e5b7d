import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { Logger } from 'pino';
import { AuthenticatedRequest } from '../auth/auth.guard';
import { MetricsService } from '../metrics/metrics.service';

const CORRELATION = /^[A-Za-z0-9_.:-]{1,100}$/;
const TASK_PATH = /^\/tasks\/([A-Za-z0-9_.:-]{1,200})(?:\/|$)/;

/**
 * One JSON line per request with task_id and correlation_id; feeds the latency
 * histogram. Logs the path without the query string and never a header or body.
 */
export function requestLog(log: Logger, metrics: MetricsService) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const started = process.hrtime.bigint();
    const header = req.headers['x-correlation-id'];
    const correlationId = typeof header === 'string' && CORRELATION.test(header) ? header : randomUUID();
    res.setHeader('X-Correlation-Id', correlationId);
    // 'close' fires for every response, also one the client dropped before it ended (an SSE stream);
    // 'finish' only for those that ended
    res.once('close', () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const path = req.path;
      const route = (req.route as { path?: string } | undefined)?.path ?? 'unmatched';
      metrics.observeRequest(req.method, route, res.statusCode, seconds);
      log.info(
        {
          method: req.method,
          path,
          route,
          status: res.statusCode,
          duration_ms: Math.round(seconds * 1e6) / 1e3,
          task_id: TASK_PATH.exec(path)?.[1] ?? null,
          correlation_id: correlationId,
          client: (req as unknown as AuthenticatedRequest).principal?.name ?? null,
        },
        'request',
      );
    });
    next();
  };
}
