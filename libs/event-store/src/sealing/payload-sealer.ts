import { isSystemSession } from '@runledger/contracts';
import { UnpositionedEvent } from '../append-batch';
import { DataKey, sealPayload } from './sealed-payload';

/** The writer's side of a key store, inside an append transaction. */
export interface WriteKeys {
  /** the session's key, created at its first use; throws for an erased session */
  keyFor(sessionId: string): DataKey;
  /** throws for an erased session */
  checkWritable(sessionId: string): void;
}

/**
 * How an append stores each payload: with `seal`, its personal fields sealed under the session's
 * data key (system streams belong to no person and stay clear); without, in clear. Either way an
 * erased session takes no more events.
 */
export class PayloadSealer {
  constructor(
    private readonly keys: WriteKeys,
    readonly seal: boolean,
  ) {}

  payloadText(e: UnpositionedEvent): string {
    if (isSystemSession(e.session_id)) return JSON.stringify(e.payload);
    if (!this.seal) {
      this.keys.checkWritable(e.session_id);
      return JSON.stringify(e.payload);
    }
    return JSON.stringify(sealPayload(e.payload, this.keys.keyFor(e.session_id), e.event_id));
  }
}
