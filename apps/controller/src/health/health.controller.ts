import { Controller, Get, Inject, Res } from '@nestjs/common';
import type { Response } from 'express';
import { Public } from '../auth/scopes';
import { HealthService } from './health.service';

@Controller('health')
export class HealthController {
  constructor(@Inject(HealthService) private readonly health: HealthService) {}

  @Get()
  @Public()
  async get(@Res({ passthrough: true }) res: Response) {
    const { ok, report } = await this.health.check();
    res.status(ok ? 200 : 503);
    return report;
  }
}
