import 'reflect-metadata';
import { METHOD_METADATA, PATH_METADATA } from '@nestjs/common/constants';
import { INestApplication, Module, RequestMethod, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { OpenAPIObject } from '@nestjs/swagger';
import { AdminEventsController } from '../admin/admin-events.controller';
import { AgUiController } from '../ag-ui/ag-ui.controller';
import { AgUiRuns } from '../ag-ui/ag-ui-runs.service';
import { AgUiStream } from '../ag-ui/ag-ui-stream';
import { DashboardController } from '../admin/dashboard.controller';
import { PUBLIC_KEY, SCOPE_KEY } from '../auth/scopes';
import { HealthController } from '../health/health.controller';
import { HealthService } from '../health/health.service';
import { MemoryController } from '../memory/memory.controller';
import { MetricsController } from '../metrics/metrics.controller';
import { MetricsService } from '../metrics/metrics.service';
import { EventBus, EventStore } from '@runledger/event-store';
import { MemoryService } from '@runledger/memory';
import { RuntimeController, TaskTree, TaskViews } from '@runledger/runtime';
import { Erasure } from '@runledger/state-store';
import { TaskStreamController } from '../tasks/task-stream.controller';
import { TasksController } from '../tasks/tasks.controller';
import { TaskCallbacks } from '../outbound/task-callbacks';
import { SessionsController } from '../sessions/sessions.controller';
import { buildOpenApiDocument } from './api-docs';
import { DocsController } from './docs.controller';

/** Every JSON API controller; the dashboard and the docs page are HTML shells, not API. */
const API_CONTROLLERS: Type[] = [
  HealthController,
  TasksController,
  TaskStreamController,
  SessionsController,
  AdminEventsController,
  MetricsController,
  MemoryController,
  AgUiController,
];

interface Route {
  method: string;
  path: string;
  scope: string | null;
}

function routesOf(controller: Type): Route[] {
  const base = String(Reflect.getMetadata(PATH_METADATA, controller) ?? '');
  const proto = controller.prototype as object;
  return Object.getOwnPropertyNames(proto).flatMap((name) => {
    const handler: unknown = Object.getOwnPropertyDescriptor(proto, name)?.value;
    if (typeof handler !== 'function' || name === 'constructor') return [];
    const method = Reflect.getMetadata(METHOD_METADATA, handler) as RequestMethod | undefined;
    if (method === undefined) return [];
    const sub = String(Reflect.getMetadata(PATH_METADATA, handler) ?? '/');
    const path = `/${[base, sub]
      .map((p) => p.replace(/^\/+|\/+$/g, ''))
      .filter(Boolean)
      .join('/')}`;
    const open = Reflect.getMetadata(PUBLIC_KEY, handler) === true;
    return [
      {
        method: RequestMethod[method].toLowerCase(),
        path: path.replace(/:([A-Za-z_]+)/g, '{$1}'),
        scope: open ? null : ((Reflect.getMetadata(SCOPE_KEY, handler) as string | undefined) ?? 'admin'),
      },
    ];
  });
}

type Operation = {
  operationId: string;
  security: Record<string, string[]>[];
  'x-required-scope'?: string;
  parameters: {
    name: string;
    in: string;
    schema: { pattern?: string; minLength?: number; maxLength?: number };
  }[];
};

describe('buildOpenApiDocument', () => {
  let app: INestApplication;
  let sut: OpenAPIObject & { paths: Record<string, Record<string, Operation>> };
  const routes = API_CONTROLLERS.flatMap(routesOf);

  beforeAll(async () => {
    // the document is read from the controllers' metadata: nothing behind them is called
    @Module({
      controllers: [...API_CONTROLLERS, DashboardController, DocsController],
      providers: [
        { provide: RuntimeController, useValue: {} },
        { provide: TaskViews, useValue: {} },
        { provide: TaskTree, useValue: {} },
        { provide: EventStore, useValue: {} },
        { provide: EventBus, useValue: {} },
        { provide: HealthService, useValue: {} },
        { provide: MetricsService, useValue: { trackWsClients: () => undefined } },
        { provide: MemoryService, useValue: null },
        { provide: Erasure, useValue: {} },
        { provide: AgUiRuns, useValue: {} },
        { provide: AgUiStream, useValue: {} },
        { provide: TaskCallbacks, useValue: {} },
      ],
    })
    class ControllersOnly {}
    app = await NestFactory.create(ControllersOnly, { logger: false });
    sut = buildOpenApiDocument(app) as typeof sut;
  });
  afterAll(async () => {
    await app.close();
  });

  it('finds the routes it checks', () => {
    expect(routes).toContainEqual({ method: 'delete', path: '/memory/{id}', scope: 'admin' });
    expect(routes.length).toBeGreaterThanOrEqual(12);
  });

  it.each(routes.map((r) => [`${r.method.toUpperCase()} ${r.path}`, r] as const))(
    'documents %s with its scope and path parameters',
    (_name, route) => {
      const op = sut.paths[route.path]?.[route.method];
      expect(op).toBeDefined();
      expect(op['x-required-scope'] ?? null).toBe(route.scope);
      expect(op.security).toEqual(route.scope ? [{ bearer: [route.scope] }] : [{}]);
      for (const [, param] of route.path.matchAll(/\{([^}]+)\}/g)) {
        const documented = op.parameters.find((p) => p.name === param && p.in === 'path');
        // a session is named by whatever session_id its tasks were submitted with
        if (param === 'session_id')
          expect(documented?.schema).toMatchObject({ minLength: 1, maxLength: 200 });
        // a signal's name is checked as a wait_for_signal names it
        else if (param === 'name')
          expect(documented?.schema.pattern).toBe('^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$');
        else expect(documented?.schema.pattern).toBe('^(?!\\.\\.?$)[A-Za-z0-9_.:-]{1,200}$');
      }
    },
  );

  it('gives every operation its own operationId', () => {
    const ids = Object.values(sut.paths).flatMap((ops) => Object.values(ops).map((op) => op.operationId));
    expect(ids.every((id) => typeof id === 'string' && id.length > 0)).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('documents no route that does not exist', () => {
    const documented = Object.entries(sut.paths).flatMap(([path, ops]) =>
      Object.keys(ops).map((method) => `${method} ${path}`),
    );
    expect(documented.sort()).toEqual(routes.map((r) => `${r.method} ${r.path}`).sort());
  });
});
