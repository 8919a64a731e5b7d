import { DynamicModule, Module } from '@nestjs/common';
import { APP_FILTER, APP_GUARD } from '@nestjs/core';
import { ThrottlerModule } from '@nestjs/throttler';
import { Logger } from 'pino';
import { EventStore, isPostgresUrl } from '@runledger/event-store';
import { STORAGE_DB, StateStoreDatabase, TaskStateStore, TaskStatsRepository } from '@runledger/state-store';
import { Kysely } from 'kysely';
import { ToolSandbox } from '@runledger/tools';
import { A2AModule } from './a2a/a2a.module';
import { AgUiModule } from './ag-ui/ag-ui.module';
import { AdminEventsController } from './admin/admin-events.controller';
import { AdminStatsController } from './admin/admin-stats.controller';
import { AdminStatsService } from './admin/admin-stats.service';
import { DashboardController } from './admin/dashboard.controller';
import { AuthGuard } from './auth/auth.guard';
import { TokenThrottlerGuard } from './auth/throttle.guard';
import { TokenRegistry } from './auth/token-registry';
import { APP_CONFIG, AppConfig } from './config';
import { CompositionModule, CompositionOptions } from './composition.module';
import { DocsController } from './docs/docs.controller';
import { HttpExceptionFilter } from './errors/http-exception.filter';
import { HealthController } from './health/health.controller';
import { HooksModule } from './hooks/hooks.module';
import { HealthProbe, PostgresHealthProbe, SqliteHealthProbe } from './health/health-probe';
import { HealthService } from './health/health.service';
import { McpController } from './mcp/mcp.controller';
import { ProtectedResourceController } from './auth/protected-resource.controller';
import { MemoryHttpModule } from './memory/memory-http.module';
import { HttpPipelineModule } from './http/http-pipeline.module';
import { TaskStreamController } from './tasks/task-stream.controller';
import { TasksController } from './tasks/tasks.controller';
import { TaskErasureController } from './tasks/task-erasure.controller';
import { OutboundModule } from './outbound/outbound.module';
import { RetentionModule } from './retention/retention.module';
import { SchedulesModule } from './schedules/schedules.module';
import { SessionsController } from './sessions/sessions.controller';
import { EventsGateway } from './ws/events.gateway';

export interface AppDeps extends CompositionOptions {
  log: Logger;
  tokens: TokenRegistry;
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
        CompositionModule.forRoot(deps),
        HttpPipelineModule,
        MemoryHttpModule,
        A2AModule,
        AgUiModule,
        OutboundModule,
        RetentionModule,
        SchedulesModule,
        HooksModule,
      ],
      controllers: [
        HealthController,
        TasksController,
        TaskErasureController,
        TaskStreamController,
        SessionsController,
        AdminEventsController,
        AdminStatsController,
        DashboardController,
        DocsController,
        McpController,
        ProtectedResourceController,
      ],
      providers: [
        { provide: TokenRegistry, useValue: deps.tokens },
        {
          provide: HealthProbe,
          // EventStore first: the storage has created and migrated the file the probe opens read-only
          useFactory: (config: AppConfig, sandbox: ToolSandbox, _events: EventStore, db: Kysely<unknown>) =>
            isPostgresUrl(config.RUNLEDGER_DB)
              ? new PostgresHealthProbe(db, () => sandbox.sandboxStatus().effective)
              : new SqliteHealthProbe(config.RUNLEDGER_DB, () => sandbox.sandboxStatus().effective),
          inject: [APP_CONFIG, ToolSandbox, EventStore, STORAGE_DB],
        },
        { provide: APP_GUARD, useClass: AuthGuard },
        { provide: APP_GUARD, useClass: TokenThrottlerGuard },
        { provide: APP_FILTER, useClass: HttpExceptionFilter },
        {
          provide: TaskStatsRepository,
          useFactory: (db: Kysely<unknown>, states: TaskStateStore) =>
            new TaskStatsRepository(db as Kysely<StateStoreDatabase>, states.catalog),
          inject: [STORAGE_DB, TaskStateStore],
        },
        AdminStatsService,
        HealthService,
        EventsGateway,
      ],
    };
  }
}
