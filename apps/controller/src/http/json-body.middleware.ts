import { Inject, Injectable, NestMiddleware } from '@nestjs/common';
import { json } from 'body-parser';
import type { NextFunction, Request, Response } from 'express';
import { ValidationError } from '@runledger/contracts';
import { APP_CONFIG, AppConfig } from '../config';

/** JSON request bodies up to RUNLEDGER_BODY_LIMIT; too large is 413 (body-parser's error, mapped by the filter). */
@Injectable()
export class JsonBodyMiddleware implements NestMiddleware {
  private readonly parse: ReturnType<typeof json>;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.parse = json({ limit: config.RUNLEDGER_BODY_LIMIT });
  }

  use(req: Request, res: Response, next: NextFunction): void {
    this.parse(req, res, (err?: unknown) =>
      // JSON.parse quotes the body in its message: never echo it (it may hold a secret)
      next(
        (err as { type?: unknown } | undefined)?.type === 'entity.parse.failed'
          ? new ValidationError('request body is not valid JSON')
          : err,
      ),
    );
  }
}
