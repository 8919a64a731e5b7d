import { Controller, Get, Inject, Query } from '@nestjs/common';
import { ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { RequireScope } from '../auth/scopes';
import { ApiErrors } from '../docs/api-docs';
import { StatsQuery, StatsQueryDto, StatsResponse, StatsResponseDto } from '../dtos/stats.dto';
import { ZodPipe } from '../dtos/zod.pipe';
import { AdminStatsService } from './admin-stats.service';

@ApiTags('admin')
@Controller('admin/stats')
export class AdminStatsController {
  constructor(@Inject(AdminStatsService) private readonly stats: AdminStatsService) {}

  @Get()
  @RequireScope('admin')
  @ApiOperation({
    operationId: 'getStats',
    summary: 'Figures for the dashboard charts: tasks per hour, tokens and cost per day and model, durations',
  })
  @ApiResponse({ status: 200, description: 'the figures of the window', type: StatsResponseDto.Output })
  @ApiErrors({ 400: 'invalid query' })
  async get(@Query(new ZodPipe(StatsQuery, 'query')) query: StatsQueryDto): Promise<StatsResponse> {
    return this.stats.overview(query.days);
  }
}
