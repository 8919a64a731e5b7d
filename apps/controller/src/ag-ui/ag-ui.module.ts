import { Module } from '@nestjs/common';
import { AgUiController } from './ag-ui.controller';
import { AgUiRuns } from './ag-ui-runs.service';
import { AgUiStream } from './ag-ui-stream';

/**
 * POST /ag-ui over RuntimeController, the event store and TaskViews (the runtime's global
 * modules); the global auth guard and exception filter apply as to every other route.
 */
@Module({ controllers: [AgUiController], providers: [AgUiRuns, AgUiStream] })
export class AgUiModule {}
