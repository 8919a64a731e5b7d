import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Controller, Get, Param, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { Response } from 'express';
import { NotFoundError } from '@runledger/contracts';
import { Public } from '../auth/scopes';

const STATIC_DIR = join(__dirname, 'static');
/** The dashboard's files by extension: a page, its ES modules, its style sheet. */
const TYPES: Record<string, string> = {
  html: 'text/html; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
};
/** A file name of the static folder itself: no path, no dot files. */
const STATIC_FILE = /^[a-z0-9][a-z0-9-]*\.([a-z]+)$/;

/**
 * The dashboard shell. The page itself holds no data and is served without a
 * token; every call it makes to the API carries the bearer token the operator
 * types in (kept in sessionStorage).
 */
@ApiExcludeController()
@Controller('admin')
export class DashboardController {
  private readonly cache = new Map<string, Buffer>();

  @Get()
  @Public()
  index(@Res() res: Response): void {
    this.serve('index.html', res);
  }

  @Get('static/:file')
  @Public()
  asset(@Param('file') file: string, @Res() res: Response): void {
    this.serve(file, res);
  }

  private serve(file: string, res: Response): void {
    const ext = STATIC_FILE.exec(file)?.[1];
    const type = ext !== undefined && Object.hasOwn(TYPES, ext) ? TYPES[ext] : undefined;
    const path = join(STATIC_DIR, file);
    if (!type || !existsSync(path)) throw new NotFoundError(`no dashboard file ${file}`);
    let body = this.cache.get(file);
    if (!body) this.cache.set(file, (body = readFileSync(path)));
    res
      .status(200)
      .set({
        'Content-Type': type,
        'Cache-Control': 'no-cache',
        'Content-Security-Policy':
          "default-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'",
        'X-Content-Type-Options': 'nosniff',
        'Referrer-Policy': 'no-referrer',
      })
      .send(body);
  }
}
