import { applyDecorators, SetMetadata } from '@nestjs/common';
import { ApiNoSecurity, ApiScope } from '../docs/api-docs';
import { Scope } from './principal';

// the names apart from the route decorators (which pull in the OpenAPI generator): the CLI reads token files
export { SCOPES, Scope, hasScope, type Principal } from './principal';

export const SCOPE_KEY = 'runledger:scope';
export const PUBLIC_KEY = 'runledger:public';
export const ANY_SCOPE_KEY = 'runledger:any-scope';

/** The scope a route needs (and its place in the OpenAPI document); routes without one (and not @Public) need `admin`. */
export const RequireScope = (scope: Scope) => applyDecorators(SetMetadata(SCOPE_KEY, scope), ApiScope(scope));
/** A route that needs a valid token of any scope; what it does checks the scope of each operation (/mcp). */
export const RequireToken = () => SetMetadata(ANY_SCOPE_KEY, true);
/** Open route: no token needed. */
export const Public = () => applyDecorators(SetMetadata(PUBLIC_KEY, true), ApiNoSecurity());
