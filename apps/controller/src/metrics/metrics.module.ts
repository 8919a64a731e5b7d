import { MiddlewareConsumer, Module, NestModule } from '@nestjs/common';
import { MetricsController } from './metrics.controller';
import { MetricsService } from './metrics.service';
import { RequestMetricsMiddleware } from './request-metrics.middleware';
import { ALL_ROUTES } from './request-route';

/** GET /metrics and the request latency middleware; exports MetricsService for the gauges' sources. */
@Module({ controllers: [MetricsController], providers: [MetricsService], exports: [MetricsService] })
export class MetricsModule implements NestModule {
  configure(consumer: MiddlewareConsumer): void {
    consumer.apply(RequestMetricsMiddleware).forRoutes(ALL_ROUTES);
  }
}
