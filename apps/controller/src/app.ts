import { mkdirSync } from 'node:fs';
import { Server } from 'node:http';
import { DynamicModule, NestApplicationOptions } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { NestExpressApplication } from '@nestjs/platform-express';
import { DestinationStream, Logger } from 'pino';
import { RuntimeController } from '@runledger/runtime';
import { AppModule } from './app.module';
import { resolveTokens } from './auth/token-registry';
import { AppConfig, dataDirOf } from './config';
import { mountApiDocs } from './docs/api-docs';
import { answerClientError } from './errors/client-error';
import { createLogger } from './logging/logger';
import { NestLogLines } from './logging/nest-log-lines';
import { EventsWsAdapter } from './ws/events-ws.adapter';

/** Makes the Nest application of the root module; tests hand one over that overrides providers (Test.createTestingModule). */
export type AppFactory = (
  root: DynamicModule,
  options: NestApplicationOptions,
) => Promise<NestExpressApplication>;

const nestFactory: AppFactory = (root, options) => NestFactory.create<NestExpressApplication>(root, options);

export interface StartOptions {
  createApp?: AppFactory;
  /** where JSON logs go (default stdout); tests capture them */
  logDestination?: DestinationStream;
  /** a logger already made; else one is made here (the runtime logs through the same one) */
  log?: Logger;
  /** where the fallback providers' api_key_env variables are read; process.env when absent */
  env?: NodeJS.ProcessEnv;
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
 * tokens, the runtime's modules and the API under NestJS over express, JSON
 * body limit, request logs, then listen, and only then take over the
 * unfinished tasks nobody runs (at once, and every lease renewal interval).
 */
export async function startApp(config: AppConfig, options: StartOptions = {}): Promise<StartedApp> {
  const log = options.log ?? createLogger(config.LOG_LEVEL, options.logDestination);
  mkdirSync(dataDirOf(config), { recursive: true });
  const { registry, generatedAdminToken } = resolveTokens(config);
  const cors = config.RUNLEDGER_CORS_ORIGIN
    ? {
        origin: config.RUNLEDGER_CORS_ORIGIN.split(',').map((o) => o.trim()),
        allowedHeaders: ['Authorization', 'Content-Type', 'Idempotency-Key', 'Last-Event-ID'],
      }
    : false;
  const app = await (options.createApp ?? nestFactory)(
    AppModule.forRoot({
      config,
      tokens: registry,
      log,
      env: options.env,
      defaultAllowedRoot: './data/workspace',
    }),
    {
      bodyParser: false,
      cors,
      bufferLogs: true,
      // a bad config or a storage that cannot open is an error to report, not a reason to abort the process
      abortOnError: false,
    },
  );
  app.useLogger(new NestLogLines(log));
  app.disable('x-powered-by');
  app.useWebSocketAdapter(new EventsWsAdapter(app, log));
  mountApiDocs(app);
  app.enableShutdownHooks();
  (app.getHttpServer() as Server).on('clientError', answerClientError);
  try {
    await app.listen(config.PORT, config.HOST);
  } catch (err) {
    // e.g. the port is taken: the runtime and storage the modules opened are closed, not left behind
    await app.close();
    throw err;
  }
  const address = app.getHttpServer().address() as { port: number };
  const host = config.HOST.includes(':') ? `[${config.HOST}]` : config.HOST;
  const url = `http://${host}:${address.port}`;
  // only once the port is bound: a process that cannot serve (EADDRINUSE) never claims or writes a task
  await app.get(RuntimeController).startRecovery();
  log.info({ url }, 'runledger listening');
  return {
    app,
    url,
    generatedAdminToken,
    // the runtime stops, memory saves its index, then the storage closes (the modules' shutdown hooks)
    close: () => app.close(),
  };
}
