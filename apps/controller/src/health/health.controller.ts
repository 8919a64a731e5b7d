import { Controller, Get, Inject, Res } from '@nestjs/common';
import { ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { Response } from 'express';
import { Public } from '../auth/scopes';
import { HealthResponseDto } from '../dtos/health.dto';
import { HealthService } from './health.service';

@ApiTags('operations')
@Controller('health')
export class HealthController {
  constructor(@Inject(HealthService) private readonly health: HealthService) {}

  @Get()
  @Public()
  @ApiOperation({
    operationId: 'getHealth',
    summary: 'Database reachable and migrations current; needs no token',
  })
  @ApiResponse({
    status: 200,
    description: 'healthy (warnings may still be listed)',
    type: HealthResponseDto.Output,
  })
  @ApiResponse({
    status: 503,
    description: 'degraded: the database is unreachable or migrations are pending',
    type: HealthResponseDto.Output,
  })
  async get(@Res({ passthrough: true }) res: Response) {
    const { ok, report } = await this.health.check();
    res.status(ok ? 200 : 503);
    return report;
  }
}
