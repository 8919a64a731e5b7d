import { applyDecorators, SetMetadata } from '@nestjs/common';
import { z } from 'zod';
import { ApiNoSecurity, ApiScope } from '../docs/api-docs';

export const SCOPES = ['tasks:read', 'tasks:write', 'approvals', 'admin'] as const;
export const Scope = z.enum(SCOPES);
export type Scope = z.infer<typeof Scope>;

/** `admin` implies every other scope. */
export const hasScope = (granted: readonly Scope[], needed: Scope): boolean =>
  granted.includes('admin') || granted.includes(needed);

export const SCOPE_KEY = 'runledger:scope';
export const PUBLIC_KEY = 'runledger:public';
export const ANY_SCOPE_KEY = 'runledger:any-scope';

/** The scope a route needs (and its place in the OpenAPI document); routes without one (and not @Public) need `admin`. */
export const RequireScope = (scope: Scope) => applyDecorators(SetMetadata(SCOPE_KEY, scope), ApiScope(scope));
/** A route that needs a valid token of any scope; what it does checks the scope of each operation (/mcp). */
export const RequireToken = () => SetMetadata(ANY_SCOPE_KEY, true);
/** Open route: no token needed. */
export const Public = () => applyDecorators(SetMetadata(PUBLIC_KEY, true), ApiNoSecurity());

/** Who made the request, attached to the request by the auth guard. Never carries the token. */
export interface Principal {
  name: string;
  scopes: readonly Scope[];
}
