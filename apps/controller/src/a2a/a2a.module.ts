import { Module } from '@nestjs/common';
import { OutboundModule } from '../outbound/outbound.module';
import { A2AController } from './a2a.controller';

/** Runledger as an A2A 1.0 agent: the card, the JSON-RPC and HTTP+JSON bindings, push notifications through the outbound deliveries. */
@Module({ imports: [OutboundModule], controllers: [A2AController] })
export class A2AModule {}
