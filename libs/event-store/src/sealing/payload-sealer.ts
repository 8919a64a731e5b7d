import { isSystemSession } from '@runledger/contracts';
import { UnpositionedEvent } from '../append-batch';
import { DataKey, KeyState, openText, sealPayload, sealText, sealedTextSession } from './sealed-payload';

/** The writer's side of a key store, inside an append transaction. */
export interface WriteKeys {
  /** the session's key, created at its first use; throws for an erased session */
  keyFor(sessionId: string): DataKey;
  /** throws for an erased session */
  checkWritable(sessionId: string): void;
  /** the session's key, its tombstone, or nothing, as this transaction read it */
  state(sessionId: string): KeyState;
}

/**
 * How a read model written inside the append transaction (the tasks rows) stores the text it copies
 * from a session's events, synchronously: `seal` as it is to be stored, `open` as readers get it
 * (null when the session's key is gone).
 */
export interface CopySealer {
  sealCopy(sessionId: string, text: string): string;
  openCopy(text: string): string | null;
}

/**
 * How an append stores each payload: with `seal`, its personal fields sealed under the session's
 * data key (system streams belong to no person and stay clear); without, in clear. Either way an
 * erased session takes no more events. The read models' copies of the content follow the same rule.
 */
export class PayloadSealer implements CopySealer {
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

  /**
   * A read model's copy of a session's content, sealed under its key (sealText). An erased session's
   * copy is the fold of its erased events (a rebuild, an erasure's refold): it holds no content and
   * is stored as it is.
   */
  readonly sealCopy = (sessionId: string, text: string): string => {
    if (!this.seal || isSystemSession(sessionId) || this.keys.state(sessionId) === 'erased') return text;
    return sealText(text, this.keys.keyFor(sessionId), sessionId);
  };

  readonly openCopy = (text: string): string | null => {
    const session = sealedTextSession(text);
    return session === null ? text : openText(text, this.keys.state(session));
  };
}
