import { Inject, Injectable, NestMiddleware } from '@nestjs/common';
import { json, raw } from 'body-parser';
import type { NextFunction, Request, Response } from 'express';
import { ValidationError } from '@runledger/contracts';
import { APP_CONFIG, AppConfig } from '../config';

/** A webhook delivery (POST /hooks/<name>) is verified over its bytes as sent, whatever their type. */
const isHookDelivery = (req: Request): boolean =>
  req.method === 'POST' && /^\/hooks\/[^/?]+\/?(?:\?|$)/.test(req.originalUrl);

/**
 * JSON request bodies up to RUNLEDGER_BODY_LIMIT; too large is 413 (body-parser's error, mapped by the
 * filter). A webhook delivery's body is kept raw (a Buffer) for its signature.
 */
@Injectable()
export class JsonBodyMiddleware implements NestMiddleware {
  private readonly parse: ReturnType<typeof json>;
  private readonly parseRaw: ReturnType<typeof raw>;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.parse = json({ limit: config.RUNLEDGER_BODY_LIMIT });
    this.parseRaw = raw({ limit: config.RUNLEDGER_BODY_LIMIT, type: () => true });
  }

  use(req: Request, res: Response, next: NextFunction): void {
    (isHookDelivery(req) ? this.parseRaw : this.parse)(req, res, (err?: unknown) =>
      // JSON.parse quotes the body in its message: never echo it (it may hold a secret)
      next(
        (err as { type?: unknown } | undefined)?.type === 'entity.parse.failed'
          ? new ValidationError('request body is not valid JSON')
          : err,
      ),
    );
  }
}
