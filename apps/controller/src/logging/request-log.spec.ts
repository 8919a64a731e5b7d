import http from 'node:http';
import { AddressInfo } from 'node:net';
import express from 'express';
import pino from 'pino';
import { RequestLogMiddleware } from './request-log';

type Line = Record<string, unknown>;

const servers: http.Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((r) => server.close(r))));
});

/** An express app with the middleware in front of `routes`, on a real port (closed after the test); its log lines are kept. */
async function serve(level: string, routes: (app: express.Express) => void) {
  const lines: Line[] = [];
  const log = pino(
    { level, base: null, timestamp: false },
    { write: (l: string) => lines.push(JSON.parse(l)) },
  );
  const app = express();
  const middleware = new RequestLogMiddleware(log);
  app.use((req, res, next) => middleware.use(req, res, next));
  routes(app);
  const server = app.listen(0, '127.0.0.1');
  servers.push(server);
  await new Promise((r) => server.once('listening', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, lines };
}

const until = async (done: () => boolean) => {
  for (let i = 0; i < 200 && !done(); i++) await new Promise((r) => setTimeout(r, 10));
};

describe('RequestLogMiddleware', () => {
  it("writes one request line when the response closes, with the caller's correlation id echoed", async () => {
    const sut = await serve('info', (app) =>
      app.get('/tasks/:task_id', (_req, res) => res.status(201).json({})),
    );
    const res = await fetch(`${sut.url}/tasks/t1?x=1`, { headers: { 'X-Correlation-Id': 'c-1' } });
    expect(res.headers.get('x-correlation-id')).toBe('c-1');
    await until(() => sut.lines.length > 0);
    expect(sut.lines).toEqual([
      {
        level: 30,
        msg: 'request',
        correlation_id: 'c-1',
        method: 'GET',
        path: '/tasks/t1',
        route: '/tasks/:task_id',
        status: 201,
        duration_ms: expect.any(Number),
        aborted: false,
        task_id: 't1',
        client: null,
      },
    ]);
  });

  it('gives a request without a usable correlation id a new one', async () => {
    const sut = await serve('info', (app) => app.get('/x', (_req, res) => res.end()));
    const res = await fetch(`${sut.url}/x`, { headers: { 'X-Correlation-Id': 'no spaces allowed' } });
    const id = res.headers.get('x-correlation-id');
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    await until(() => sut.lines.length > 0);
    expect(sut.lines).toEqual([expect.objectContaining({ correlation_id: id, route: '/x' })]);
  });

  it('marks a response the client dropped before it ended as aborted', async () => {
    const sut = await serve('info', (app) => app.get('/stream', (_req, res) => res.write('first')));
    await new Promise<void>((resolve) => {
      const req = http.get(`${sut.url}/stream`, (res) => res.once('data', () => (req.destroy(), resolve())));
    });
    await until(() => sut.lines.length > 0);
    expect(sut.lines).toEqual([expect.objectContaining({ route: '/stream', status: 200, aborted: true })]);
  });

  it('adds an error the response emitted to its line, instead of letting it go unhandled', async () => {
    const sut = await serve('info', (app) =>
      app.get('/late', (_req, res) => {
        res.end('done');
        res.write('after the end');
      }),
    );
    expect((await fetch(`${sut.url}/late`)).status).toBe(200);
    await until(() => sut.lines.length > 0);
    expect(sut.lines).toEqual([
      expect.objectContaining({
        route: '/late',
        err: expect.objectContaining({ code: 'ERR_STREAM_WRITE_AFTER_END' }),
      }),
    ]);
  });

  it('writes no line below its level, and still echoes the correlation id', async () => {
    const sut = await serve('warn', (app) => app.get('/x', (_req, res) => res.end()));
    const res = await fetch(`${sut.url}/x`, { headers: { 'X-Correlation-Id': 'c-2' } });
    expect(res.headers.get('x-correlation-id')).toBe('c-2');
    await new Promise((r) => setTimeout(r, 50));
    expect(sut.lines).toEqual([]);
  });
});
