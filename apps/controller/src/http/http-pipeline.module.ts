import { MiddlewareConsumer, Module, NestModule } from '@nestjs/common';
import { MetricsModule } from '../metrics/metrics.module';
import { RequestMetricsMiddleware } from '../metrics/request-metrics.middleware';
import { ALL_ROUTES } from '../metrics/request-route';
import { JsonBodyMiddleware } from './json-body.middleware';

/**
 * What every request goes through before its controller, in this order: its timing (pino-http's request
 * line comes first, from nestjs-pino's global module), then the JSON body. A body refused as invalid or
 * too large is still logged and measured, which it was not while the parser ran ahead of them.
 */
@Module({ imports: [MetricsModule], exports: [MetricsModule] })
export class HttpPipelineModule implements NestModule {
  configure(consumer: MiddlewareConsumer): void {
    consumer.apply(RequestMetricsMiddleware, JsonBodyMiddleware).forRoutes(ALL_ROUTES);
  }
}
