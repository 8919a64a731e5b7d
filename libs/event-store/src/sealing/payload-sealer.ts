import { isSystemSession } from '@runledger/contracts';
import { UnpositionedEvent } from '../append-batch';
import {
  DataKey,
  KeyOwner,
  KeyReader,
  KeyState,
  keyOwnerOf,
  openText,
  sealPayload,
  sealText,
} from './sealed-payload';

/** The writer's side of a key store, inside an append transaction (KeyRules over its rows). */
export interface WriteKeys extends KeyReader {
  /** the owner's key, created at its first use; throws for an erased owner (or session) */
  keyFor(owner: KeyOwner): DataKey;
  /** throws for an erased owner (or session) */
  checkWritable(owner: KeyOwner): void;
  /** the owner's key, its tombstone, or nothing, as this transaction read it */
  existingKey(owner: KeyOwner): KeyState;
}

/**
 * How a read model written inside the append transaction (the tasks rows) stores the text it copies
 * from an owner's events, synchronously: `sealCopy` as it is to be stored (under the owner's key:
 * a task's row under its stream's), `openCopy` as readers get it (null when the key is gone).
 */
export interface CopySealer {
  sealCopy(owner: KeyOwner, text: string): string;
  openCopy(text: string): string | null;
}

/**
 * How an append stores each payload: with `seal`, its personal fields sealed under its owner's data
 * key (keyOwnerOf: its stream's, so a task tree can be erased alone; system streams belong to no
 * person and stay clear); without, in clear. Either way an erased owner takes no more events. The
 * read models' copies of the content follow the same rule.
 */
export class PayloadSealer implements CopySealer {
  constructor(
    private readonly keys: WriteKeys,
    readonly seal: boolean,
  ) {}

  payloadText(e: UnpositionedEvent): string {
    if (isSystemSession(e.session_id)) return JSON.stringify(e.payload);
    const owner = keyOwnerOf(e);
    if (!this.seal) {
      this.keys.checkWritable(owner);
      return JSON.stringify(e.payload);
    }
    return JSON.stringify(sealPayload(e.payload, this.keys.keyFor(owner), e.event_id));
  }

  /**
   * A read model's copy of an owner's content, sealed under its key (sealText). An erased owner's
   * copy is the fold of its erased events (a rebuild, an erasure's refold): it holds no content and
   * is stored as it is.
   */
  readonly sealCopy = (owner: KeyOwner, text: string): string => {
    if (!this.seal || isSystemSession(owner.session_id) || this.keys.existingKey(owner) === 'erased')
      return text;
    return sealText(text, this.keys.keyFor(owner), owner);
  };

  readonly openCopy = (text: string): string | null => openText(text, this.keys);
}
