import { DynamicModule, MiddlewareConsumer, Module, NestModule } from '@nestjs/common';
import { ApiBackend } from '../runtime.port';
import { MetricsController } from './metrics.controller';
import { MetricsService } from './metrics.service';
import { RequestMetricsMiddleware } from './request-metrics.middleware';
import { ALL_ROUTES } from './request-route';

/** GET /metrics and the request latency middleware; exports MetricsService for the gauges' sources. */
@Module({})
export class MetricsModule implements NestModule {
  static forRoot(backend: ApiBackend): DynamicModule {
    return {
      module: MetricsModule,
      controllers: [MetricsController],
      providers: [{ provide: ApiBackend, useValue: backend }, MetricsService],
      exports: [MetricsService],
    };
  }

  configure(consumer: MiddlewareConsumer): void {
    consumer.apply(RequestMetricsMiddleware).forRoutes(ALL_ROUTES);
  }
}
