import { DynamicModule, Inject, Injectable, Module, Scope } from '@nestjs/common';
import { LoggerModule, PARAMS_PROVIDER_TOKEN, Params, PinoLogger } from 'nestjs-pino';
// nestjs-pino keeps the request's logger in this AsyncLocalStorage; its index does not export it
import { storage } from 'nestjs-pino/storage';
import type { Logger } from 'pino';
import { ALL_ROUTES } from '../metrics/request-route';
import { requestLogParams } from './request-log';

const APP_LOG = Symbol('APP_LOG');

/**
 * nestjs-pino's PinoLogger writes a message logged outside a request to a logger of the first app
 * the process made (module state); this one writes it to its own app's pino instance, so several apps
 * in one process (tests) keep their logs apart. Inside a request it is the request's logger, as there.
 */
@Injectable({ scope: Scope.TRANSIENT })
class AppPinoLogger extends PinoLogger {
  constructor(
    @Inject(PARAMS_PROVIDER_TOKEN) params: Params,
    @Inject(APP_LOG) private readonly appLog: Logger,
  ) {
    super(params);
  }

  override get logger(): Logger {
    return storage.getStore()?.logger ?? this.appLog;
  }
}

/**
 * nestjs-pino over the app's pino instance: request lines (pino-http) and the Logger that Nest's own
 * messages go through (app.useLogger(app.get(Logger))).
 */
@Module({})
export class LoggingModule {
  static forRoot(log: Logger): DynamicModule {
    return {
      module: LoggingModule,
      imports: [
        LoggerModule.forRootAsync({
          providers: [
            { provide: APP_LOG, useValue: log },
            { provide: PinoLogger, useClass: AppPinoLogger },
          ],
          inject: [APP_LOG],
          useFactory: (appLog: Logger) => requestLogParams(appLog, [ALL_ROUTES]),
        }),
      ],
    };
  }
}
