import { DynamicModule, Module } from '@nestjs/common';
import { APP_FILTER, APP_GUARD } from '@nestjs/core';
import { ThrottlerModule } from '@nestjs/throttler';
import { Logger } from 'pino';
import { AdminEventsController } from './admin/admin-events.controller';
import { DashboardController } from './admin/dashboard.controller';
import { AuthGuard } from './auth/auth.guard';
import { TokenThrottlerGuard } from './auth/throttle.guard';
import { TokenRegistry } from './auth/token-registry';
import { APP_CONFIG, AppConfig } from './config';
import { DocsController } from './docs/docs.controller';
import { HttpExceptionFilter } from './errors/http-exception.filter';
import { HealthController } from './health/health.controller';
import { HealthService } from './health/health.service';
import { LoggingModule } from './logging/logging.module';
import { MetricsModule } from './metrics/metrics.module';
import { ApiBackend } from './runtime.port';
import { TaskStreamController } from './tasks/task-stream.controller';
import { TasksController } from './tasks/tasks.controller';
import { LOGGER } from './tokens';
import { EventsGateway } from './ws/events.gateway';

export interface AppDeps {
  config: AppConfig;
  backend: ApiBackend;
  tokens: TokenRegistry;
  log: Logger;
  /** feature modules composed elsewhere (e.g. the /memory routes); the global guards and filter apply to them */
  modules?: DynamicModule[];
}

@Module({})
export class AppModule {
  static forRoot(deps: AppDeps): DynamicModule {
    const limit = deps.config.RUNLEDGER_RATE_LIMIT;
    return {
      module: AppModule,
      imports: [
        ThrottlerModule.forRoot({
          throttlers: [{ ttl: 60_000, limit: Math.max(limit, 1) }],
          skipIf: () => limit === 0,
        }),
        LoggingModule.forRoot(deps.log),
        MetricsModule.forRoot(deps.backend),
        ...(deps.modules ?? []),
      ],
      controllers: [
        HealthController,
        TasksController,
        TaskStreamController,
        AdminEventsController,
        DashboardController,
        DocsController,
      ],
      providers: [
        { provide: APP_CONFIG, useValue: deps.config },
        { provide: ApiBackend, useValue: deps.backend },
        { provide: TokenRegistry, useValue: deps.tokens },
        { provide: LOGGER, useValue: deps.log },
        { provide: APP_GUARD, useClass: AuthGuard },
        { provide: APP_GUARD, useClass: TokenThrottlerGuard },
        { provide: APP_FILTER, useClass: HttpExceptionFilter },
        HealthService,
        EventsGateway,
      ],
    };
  }
}
