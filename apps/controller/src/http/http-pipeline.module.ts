import { MiddlewareConsumer, Module, NestModule } from '@nestjs/common';
import { MetricsModule } from '../metrics/metrics.module';
import { RequestMetricsMiddleware } from '../metrics/request-metrics.middleware';
import { ALL_ROUTES } from '../metrics/request-route';
import { RequestLogMiddleware } from '../logging/request-log';
import { JsonBodyMiddleware } from './json-body.middleware';

/**
 * What every request goes through before its controller, in this order: its request line and its
 * timing, then the JSON body. A body refused as invalid or too large is still logged and measured,
 * which it was not while the parser ran ahead of them.
 */
@Module({ imports: [MetricsModule], exports: [MetricsModule] })
export class HttpPipelineModule implements NestModule {
  configure(consumer: MiddlewareConsumer): void {
    consumer.apply(RequestLogMiddleware, RequestMetricsMiddleware, JsonBodyMiddleware).forRoutes(ALL_ROUTES);
  }
}
