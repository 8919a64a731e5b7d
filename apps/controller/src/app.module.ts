import { DynamicModule, Module } from '@nestjs/common';
import Database from 'better-sqlite3';
import { APP_CONFIG, AppConfig } from './config';
import { HealthController } from './health/health.controller';
import { HealthService } from './health/health.service';
import { DATABASE } from './tokens';

export interface AppDeps {
  config: AppConfig;
  db: Database.Database;
}

@Module({})
export class AppModule {
  static forRoot(deps: AppDeps): DynamicModule {
    return {
      module: AppModule,
      controllers: [HealthController],
      providers: [
        { provide: APP_CONFIG, useValue: deps.config },
        { provide: DATABASE, useValue: deps.db },
        HealthService,
      ],
    };
  }
}
