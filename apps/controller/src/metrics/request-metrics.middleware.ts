import { Inject, Injectable, NestMiddleware } from '@nestjs/common';
import type { NextFunction, Request, Response } from 'express';
import { MetricsService } from './metrics.service';
import { requestRoute } from './request-route';

/** Feeds the request latency histogram, by method, route pattern and status. */
@Injectable()
export class RequestMetricsMiddleware implements NestMiddleware {
  constructor(@Inject(MetricsService) private readonly metrics: MetricsService) {}

  use(req: Request, res: Response, next: NextFunction): void {
    const observe = this.metrics.startRequestTimer();
    // 'close' fires for every response, also one the client dropped before it ended (an SSE stream);
    // 'finish' only for those that ended
    res.once('close', () => observe(req.method, requestRoute(req), res.statusCode));
    next();
  }
}
