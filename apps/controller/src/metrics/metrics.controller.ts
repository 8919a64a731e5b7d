import { Controller, Get, Header, Inject } from '@nestjs/common';
import { ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { Registry } from 'prom-client';
import { RequireScope } from '../auth/scopes';
import { MetricsService } from './metrics.service';

@ApiTags('operations')
@Controller('metrics')
export class MetricsController {
  constructor(@Inject(MetricsService) private readonly metrics: MetricsService) {}

  @Get()
  @RequireScope('admin')
  @Header('Content-Type', Registry.PROMETHEUS_CONTENT_TYPE)
  @ApiOperation({ operationId: 'getMetrics', summary: 'Prometheus metrics' })
  @ApiResponse({
    status: 200,
    description: 'the Prometheus text exposition format 0.0.4',
    content: { 'text/plain': { schema: { type: 'string' } } },
  })
  render(): Promise<string> {
    return this.metrics.render();
  }
}
