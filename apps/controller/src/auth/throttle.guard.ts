import { ExecutionContext, Injectable } from '@nestjs/common';
import { ThrottlerGuard, ThrottlerLimitDetail } from '@nestjs/throttler';
import { PUBLIC_KEY } from './scopes';
import { AuthenticatedRequest } from './auth.guard';

/** Rate limit per token (the principal the auth guard attached); open routes are not limited. */
@Injectable()
export class TokenThrottlerGuard extends ThrottlerGuard {
  protected override async getTracker(req: Record<string, unknown>): Promise<string> {
    const principal = (req as AuthenticatedRequest).principal;
    return principal ? `token:${principal.name}` : `ip:${String(req.ip)}`;
  }

  protected override async getErrorMessage(
    _context: ExecutionContext,
    detail: ThrottlerLimitDetail,
  ): Promise<string> {
    const perMinute = Math.round((detail.limit * 60_000) / detail.ttl);
    return `rate limit of ${perMinute} requests per minute for this token; retry after ${detail.timeToBlockExpire} s`;
  }

  protected override async shouldSkip(context: ExecutionContext): Promise<boolean> {
    return (
      context.getType() !== 'http' ||
      this.reflector.getAllAndOverride<boolean>(PUBLIC_KEY, [context.getHandler(), context.getClass()]) ===
        true
    );
  }
}
