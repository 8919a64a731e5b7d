import { Inject, Module, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { EventStore } from '@runledger/event-store';
import { RuntimeController, RuntimeLogger, Scheduler } from '@runledger/runtime';
import { SchedulesController } from './schedules.controller';

/** Ticks the schedules while the server runs; stops (after the tick in flight) before the runtime closes. */
export class SchedulerHost implements OnApplicationBootstrap, OnModuleDestroy {
  constructor(@Inject(Scheduler) private readonly scheduler: Scheduler) {}

  onApplicationBootstrap(): void {
    this.scheduler.start();
  }

  onModuleDestroy(): Promise<void> {
    return this.scheduler.stop();
  }
}

@Module({
  controllers: [SchedulesController],
  providers: [
    {
      provide: Scheduler,
      useFactory: (store: EventStore, runtime: RuntimeController, logger: RuntimeLogger) =>
        new Scheduler(store, runtime, logger),
      inject: [EventStore, RuntimeController, RuntimeLogger],
    },
    SchedulerHost,
  ],
})
export class SchedulesModule {}
