import { mkdirSync } from 'node:fs';
import { Server } from 'node:http';
import { dirname, resolve } from 'node:path';
import { DynamicModule } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { NestExpressApplication } from '@nestjs/platform-express';
import { Logger as NestLogger } from 'nestjs-pino';
import { DestinationStream, Logger } from 'pino';
import { ValidationError } from '@runledger/contracts';
import { AppModule } from './app.module';
import { resolveTokens } from './auth/token-registry';
import { AppConfig } from './config';
import { mountApiDocs } from './docs/api-docs';
import { answerClientError } from './errors/client-error';
import { createLogger } from './logging/logger';
import { ApiBackend } from './runtime.port';
import { EventsWsAdapter } from './ws/events-ws.adapter';

export interface StartOptions {
  /** where JSON logs go (default stdout); tests capture them */
  logDestination?: DestinationStream;
  /** a logger already made (bootController shares one with the runtime); else one is made here */
  log?: Logger;
  /** feature modules to mount beside the API (e.g. /memory) */
  modules?: DynamicModule[];
}

export interface StartedApp {
  app: NestExpressApplication;
  url: string;
  /** set when no token was configured and an admin token was generated (or reused) beside the DB */
  generatedAdminToken: { token: string; file: string; created: boolean } | null;
  close(): Promise<void>;
}

/**
 * Boot the controller on config HOST/PORT (tests pass PORT 0 and a temp DB):
 * tokens, NestJS over express, JSON body limit, request logs, then listen and
 * let the backend resume unfinished tasks.
 */
export async function startApp(
  config: AppConfig,
  backend: ApiBackend,
  options: StartOptions = {},
): Promise<StartedApp> {
  const log = options.log ?? createLogger(config.LOG_LEVEL, options.logDestination);
  mkdirSync(dirname(resolve(config.RUNLEDGER_DB)), { recursive: true });
  const { registry, generatedAdminToken } = resolveTokens(config);
  const cors = config.RUNLEDGER_CORS_ORIGIN
    ? {
        origin: config.RUNLEDGER_CORS_ORIGIN.split(',').map((o) => o.trim()),
        allowedHeaders: ['Authorization', 'Content-Type', 'Idempotency-Key', 'Last-Event-ID'],
      }
    : false;
  const app = await NestFactory.create<NestExpressApplication>(
    AppModule.forRoot({ config, backend, tokens: registry, log, modules: options.modules }),
    {
      bodyParser: false,
      cors,
      bufferLogs: true,
    },
  );
  app.useLogger(app.get(NestLogger));
  app.disable('x-powered-by');
  app.useWebSocketAdapter(new EventsWsAdapter(app, log));
  app.useBodyParser('json', { limit: config.RUNLEDGER_BODY_LIMIT });
  // JSON.parse quotes the body in its message: never echo it (it may hold a secret)
  app.use((err: unknown, _req: unknown, _res: unknown, next: (e: unknown) => void) => {
    next(
      (err as { type?: unknown }).type === 'entity.parse.failed'
        ? new ValidationError('request body is not valid JSON')
        : err,
    );
  });
  mountApiDocs(app);
  app.enableShutdownHooks();
  (app.getHttpServer() as Server).on('clientError', answerClientError);
  await app.listen(config.PORT, config.HOST);
  const address = app.getHttpServer().address() as { port: number };
  const host = config.HOST.includes(':') ? `[${config.HOST}]` : config.HOST;
  const url = `http://${host}:${address.port}`;
  await backend.start();
  log.info({ url }, 'runledger listening');
  return {
    app,
    url,
    generatedAdminToken,
    close: async () => {
      await app.close();
      await backend.close();
    },
  };
}
