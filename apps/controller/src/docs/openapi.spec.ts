import 'reflect-metadata';
import { METHOD_METADATA, PATH_METADATA } from '@nestjs/common/constants';
import { RequestMethod, Type } from '@nestjs/common';
import { AdminEventsController } from '../admin/admin-events.controller';
import { PUBLIC_KEY, SCOPE_KEY } from '../auth/scopes';
import { HealthController } from '../health/health.controller';
import { MemoryController } from '../memory/memory.controller';
import { MetricsController } from '../metrics/metrics.controller';
import { TaskStreamController } from '../tasks/task-stream.controller';
import { TasksController } from '../tasks/tasks.controller';
import { buildOpenApiDocument } from './openapi';

/** Every JSON API controller; the dashboard and the docs page are HTML shells, not API. */
const API_CONTROLLERS: Type[] = [
  HealthController,
  TasksController,
  TaskStreamController,
  AdminEventsController,
  MetricsController,
  MemoryController,
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

describe('buildOpenApiDocument', () => {
  const sut = buildOpenApiDocument() as {
    paths: Record<string, Record<string, { 'x-required-scope'?: string; parameters: { name: string }[] }>>;
  };
  const routes = API_CONTROLLERS.flatMap(routesOf);

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
      for (const [, param] of route.path.matchAll(/\{([^}]+)\}/g))
        expect(op.parameters.map((p) => p.name)).toContain(param);
    },
  );

  it('documents no route that does not exist', () => {
    const documented = Object.entries(sut.paths).flatMap(([path, ops]) =>
      Object.keys(ops).map((method) => `${method} ${path}`),
    );
    expect(documented.sort()).toEqual(routes.map((r) => `${r.method} ${r.path}`).sort());
  });
});
