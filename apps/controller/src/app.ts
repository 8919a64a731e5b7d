import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { NestFactory } from '@nestjs/core';
import { NestExpressApplication } from '@nestjs/platform-express';
import { WsAdapter } from '@nestjs/platform-ws';
import Database from 'better-sqlite3';
import { AppConfig } from './config';
import { AppModule } from './app.module';

export interface StartedApp {
  app: NestExpressApplication;
  url: string;
  close(): Promise<void>;
}

function openDatabase(config: AppConfig): Database.Database {
  const file = resolve(config.RUNLEDGER_DB);
  mkdirSync(dirname(file), { recursive: true });
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  return db;
}

/** Boot the controller on config HOST/PORT; tests pass PORT 0 and a temp DB. */
export async function startApp(config: AppConfig): Promise<StartedApp> {
  const db = openDatabase(config);
  const app = await NestFactory.create<NestExpressApplication>(AppModule.forRoot({ config, db }), {
    bodyParser: false,
    logger: ['error', 'warn'],
  });
  app.useWebSocketAdapter(new WsAdapter(app));
  app.useBodyParser('json', { limit: config.RUNLEDGER_BODY_LIMIT });
  await app.listen(config.PORT, config.HOST);
  const address = app.getHttpServer().address() as { port: number };
  const url = `http://${config.HOST}:${address.port}`;
  return {
    app,
    url,
    close: async () => {
      await app.close();
      db.close();
    },
  };
}
