import { ExecutionContext, Injectable } from '@nestjs/common';
import { ThrottlerGuard } from '@nestjs/throttler';
import { PUBLIC_KEY } from './scopes';
import { AuthenticatedRequest } from './auth.guard';

/** Rate limit per token (the principal the auth guard attached); open routes are not limited. */
@Injectable()
export class TokenThrottlerGuard extends ThrottlerGuard {
  protected override async getTracker(req: Record<string, unknown>): Promise<string> {
    const principal = (req as AuthenticatedRequest).principal;
    return principal ? `token:${principal.name}` : `ip:${String(req.ip)}`;
  }

  protected override async shouldSkip(context: ExecutionContext): Promise<boolean> {
    return (
      context.getType() !== 'http' ||
      this.reflector.getAllAndOverride<boolean>(PUBLIC_KEY, [context.getHandler(), context.getClass()]) ===
        true
    );
  }
}
