import { RequestMethod } from '@nestjs/common';
import type { Request } from 'express';

/** a middleware's routes: every one, also a path no controller matched (a 404 is logged and measured too) */
export const ALL_ROUTES = { path: '{*path}', method: RequestMethod.ALL };
// Nest mounts such a middleware as an express route of this pattern; a controller's route replaces it
// on req.route, so a request that still carries it matched no controller
const MIDDLEWARE_ROUTE = `/${ALL_ROUTES.path}`;

/** the route pattern a request matched ('/tasks/:task_id'), which keeps ids out of labels; 'unmatched' for a 404 */
export function requestRoute(req: Request): string {
  const route = (req.route as { path?: string } | undefined)?.path;
  return route === undefined || route === MIDDLEWARE_ROUTE ? 'unmatched' : route;
}
