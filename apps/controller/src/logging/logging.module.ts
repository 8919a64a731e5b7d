import { DynamicModule, Module } from '@nestjs/common';
import { LoggerModule } from 'nestjs-pino';
import type { Logger } from 'pino';
import { ALL_ROUTES } from '../metrics/request-route';
import { requestLogParams } from './request-log';

/**
 * nestjs-pino over the app's pino instance: request lines (pino-http) and the Logger that Nest's own
 * messages go through (app.useLogger(app.get(Logger))).
 */
@Module({})
export class LoggingModule {
  static forRoot(log: Logger): DynamicModule {
    return {
      module: LoggingModule,
      imports: [LoggerModule.forRootAsync({ useFactory: () => requestLogParams(log, [ALL_ROUTES]) })],
    };
  }
}
