import { Module } from '@nestjs/common';
import { EventStore } from '@runledger/event-store';
import { RuntimeController } from '@runledger/runtime';
import { APP_CONFIG, AppConfig } from '../config';
import { PROCESS_ENV } from '../tokens';
import { HooksController } from './hooks.controller';
import { InboundHooks, configuredHooks } from './inbound-hooks';

/** Inbound webhooks: their secrets are read from the environment here, before the service drops those variables. */
@Module({
  controllers: [HooksController],
  providers: [
    {
      provide: InboundHooks,
      useFactory: (c: AppConfig, env: NodeJS.ProcessEnv, store: EventStore, runtime: RuntimeController) =>
        new InboundHooks(configuredHooks(c.RUNLEDGER_HOOKS ?? [], env), store, runtime),
      inject: [APP_CONFIG, PROCESS_ENV, EventStore, RuntimeController],
    },
  ],
})
export class HooksModule {}
