import { METHODS } from 'node:http';
import { NotFoundException } from '@nestjs/common';
import type { Request } from 'express';
import { ErrorBody } from './error-body';

/** The parts of an express router layer this reads (router 2, express 5). */
interface RouterLayer {
  route?: { methods: Record<string, boolean> };
  match(path: string): unknown;
}

/** A path whose parameters cannot be decoded (`/tasks/%FF`) matches no route. */
function matches(layer: RouterLayer, path: string): boolean {
  try {
    return Boolean(layer.match(path));
  } catch {
    return false;
  }
}

/** Nest mounts middleware (`forRoutes('*')`) as routes for every method: they offer nothing of their own. */
const answersEveryMethod = (methods: Record<string, boolean>): boolean =>
  METHODS.every((m) => methods[m.toLowerCase()]);

/** The methods the routes of the app offer on this request's path (GET implies HEAD); empty when no route has the path. */
export function allowedMethods(req: Request): string[] {
  const stack = (req.app as unknown as { router?: { stack: RouterLayer[] } }).router?.stack ?? [];
  const allowed = new Set<string>();
  for (const layer of stack) {
    if (!layer.route || answersEveryMethod(layer.route.methods) || !matches(layer, req.path)) continue;
    for (const method of Object.keys(layer.route.methods))
      if (method !== '_all') allowed.add(method.toUpperCase());
  }
  if (allowed.has('GET')) allowed.add('HEAD');
  return [...allowed].sort();
}

/**
 * Nest answers a request no route matched with a NotFoundException. When the
 * path exists under other methods, the answer is 405 with the `Allow` header
 * (RFC 9110); an unknown path stays 404.
 */
export function methodNotAllowed(
  exception: unknown,
  req: Request,
): { allow: string[]; body: ErrorBody } | null {
  if (!(exception instanceof NotFoundException)) return null;
  const allow = allowedMethods(req);
  if (allow.length === 0 || allow.includes(req.method)) return null;
  return {
    allow,
    body: {
      error: 'method_not_allowed',
      message: `${req.method} is not allowed on ${req.path}; allowed: ${allow.join(', ')}`,
      details: { allowed: allow },
    },
  };
}
