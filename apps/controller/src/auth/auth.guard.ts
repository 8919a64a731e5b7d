import { CanActivate, ExecutionContext, Inject, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { ForbiddenError, UnauthorizedError } from '@runledger/contracts';
import { ANY_SCOPE_KEY, PUBLIC_KEY, Principal, SCOPE_KEY, Scope, hasScope } from './scopes';
import { TokenRegistry, bearerToken } from './token-registry';

export type AuthenticatedRequest = {
  headers: Record<string, string | string[] | undefined>;
  principal?: Principal;
};

/**
 * Every HTTP route needs a bearer token with the route's scope unless marked
 * @Public; a route that names no scope needs `admin`.
 */
@Injectable()
export class AuthGuard implements CanActivate {
  constructor(
    @Inject(Reflector) private readonly reflector: Reflector,
    @Inject(TokenRegistry) private readonly tokens: TokenRegistry,
  ) {}

  canActivate(context: ExecutionContext): boolean {
    if (context.getType() !== 'http') return true;
    const targets = [context.getHandler(), context.getClass()];
    if (this.reflector.getAllAndOverride<boolean>(PUBLIC_KEY, targets)) return true;
    const req = context.switchToHttp().getRequest<AuthenticatedRequest>();
    if (this.reflector.getAllAndOverride<boolean>(ANY_SCOPE_KEY, targets)) {
      req.principal = authenticate(this.tokens, bearerToken(req.headers.authorization));
      return true;
    }
    const needed = this.reflector.getAllAndOverride<Scope>(SCOPE_KEY, targets) ?? 'admin';
    req.principal = authorize(this.tokens, bearerToken(req.headers.authorization), needed);
    return true;
  }
}

/** Shared by HTTP, SSE and WebSocket: the principal of a token that holds `needed`, or a typed 401/403. */
export function authorize(tokens: TokenRegistry, token: string | null, needed: Scope): Principal {
  const principal = authenticate(tokens, token);
  requireScope(principal, needed);
  return principal;
}

/** The principal of a valid token, whatever its scopes (each operation then checks its own), or a typed 401. */
export function authenticate(tokens: TokenRegistry, token: string | null): Principal {
  if (!token) throw new UnauthorizedError('missing bearer token (Authorization: Bearer <token>)');
  const principal = tokens.authenticate(token);
  if (!principal) throw new UnauthorizedError('invalid token');
  return principal;
}

export function requireScope(principal: Principal, needed: Scope): void {
  if (!hasScope(principal.scopes, needed)) {
    throw new ForbiddenError(`this operation needs the ${needed} scope`, { required_scope: needed });
  }
}
