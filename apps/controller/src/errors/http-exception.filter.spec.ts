import { Controller, Get, INestApplication, MiddlewareConsumer, Module, NestModule } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import pino from 'pino';
import { RequestLogMiddleware } from '../logging/request-log';
import { LOGGER } from '../tokens';
import { HttpExceptionFilter } from './http-exception.filter';

@Controller('broken')
class BrokenController {
  @Get()
  fail(): never {
    throw new Error('database password is hunter2');
  }
}

describe('HttpExceptionFilter', () => {
  let app: INestApplication;
  let url: string;
  const lines: Array<Record<string, unknown>> = [];

  beforeAll(async () => {
    const log = pino({ base: null, timestamp: false }, { write: (l: string) => lines.push(JSON.parse(l)) });
    @Module({ controllers: [BrokenController], providers: [{ provide: LOGGER, useValue: log }] })
    class BrokenModule implements NestModule {
      configure(consumer: MiddlewareConsumer): void {
        consumer.apply(RequestLogMiddleware).forRoutes('*');
      }
    }
    const moduleRef = await Test.createTestingModule({ imports: [BrokenModule] }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    app.useGlobalFilters(new HttpExceptionFilter(log));
    await app.listen(0, '127.0.0.1');
    url = await app.getUrl();
  });

  afterAll(() => app.close());

  it("answers an unknown fault 500 without its message, and logs it with the request's correlation id", async () => {
    const res = await fetch(`${url}/broken`, { headers: { 'X-Correlation-Id': 'c-500' } });
    expect(res.status).toBe(500);
    const body = await res.text();
    expect(JSON.parse(body)).toMatchObject({ error: expect.any(String), message: expect.any(String) });
    expect(body).not.toContain('hunter2');
    for (let i = 0; i < 100 && lines.length < 2; i++) await new Promise((r) => setTimeout(r, 10));
    expect(lines).toEqual([
      expect.objectContaining({
        level: 50,
        msg: 'unhandled error',
        correlation_id: 'c-500',
        err: expect.objectContaining({ message: 'database password is hunter2' }),
      }),
      expect.objectContaining({ msg: 'request', correlation_id: 'c-500', status: 500 }),
    ]);
  });
});
