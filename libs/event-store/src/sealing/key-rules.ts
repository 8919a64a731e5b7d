import { IllegalStateError, isSystemSession } from '@runledger/contracts';
import { WriteKeys } from './payload-sealer';
import { DataKey, KeyOwner, KeyReader, KeyState } from './sealed-payload';

export interface SessionRow {
  key_id: string | null;
  key: Buffer | null;
  erased_at: string | null;
}

export interface StreamRow extends SessionRow {
  stream_id: string;
  session_id: string;
}

/** A session's row: its own key (stores sealed one key per session, and system-stream events naming no task), or its tombstone. */
export interface SessionKeys {
  erased: boolean;
  key: DataKey | null;
}

/** A stream's row: the key of its owner (a task's stream), or its tombstone once its tree was erased. */
export interface StreamKeys extends SessionKeys {
  session_id: string;
}

/** An append to a session whose data key was destroyed: its conversation is over. */
export const erasedSessionError = (sessionId: string): IllegalStateError =>
  new IllegalStateError(`session ${sessionId} was erased; it takes no more events`, {
    session_id: sessionId,
    erased: true,
  });

/** An append to a stream of an erased task tree. */
export const erasedStreamError = (owner: KeyOwner): IllegalStateError =>
  new IllegalStateError(`${owner.stream_id} belongs to an erased task tree; it takes no more events`, {
    session_id: owner.session_id,
    task_id: owner.stream_id,
    erased: true,
  });

const keyOf = (row: SessionRow): DataKey | null =>
  row.erased_at === null && row.key && row.key_id ? { key_id: row.key_id, key: row.key } : null;

export const sessionKeysOf = (row: SessionRow | undefined): SessionKeys =>
  row ? { erased: row.erased_at !== null, key: keyOf(row) } : { erased: false, key: null };

export const streamKeysOf = (row: StreamRow | undefined): StreamKeys | null =>
  row ? { session_id: row.session_id, erased: row.erased_at !== null, key: keyOf(row) } : null;

/**
 * The rules of a key store, whatever holds its rows (see KeyOwner): how a sealed value, a clear
 * event and a writer find their key, over the rows `rows` reads.
 */
export class KeyRules implements KeyReader, WriteKeys {
  constructor(
    private readonly rows: {
      session(sessionId: string): SessionKeys;
      stream(streamId: string): StreamKeys | null;
      byKeyId(keyId: string): StreamKeys | null;
      /** creates (or finds, when another writer made it first) the owner's key */
      create(owner: KeyOwner): DataKey | 'erased';
    },
  ) {}

  sealedState(sessionId: string, keyId: string): KeyState {
    const session = this.rows.session(sessionId);
    if (session.erased) return 'erased';
    if (session.key?.key_id === keyId) return session.key;
    const stream = this.rows.byKeyId(keyId);
    if (!stream || stream.session_id !== sessionId) return undefined;
    return stream.erased ? 'erased' : (stream.key ?? undefined);
  }

  erasedOwner(owner: KeyOwner): boolean {
    if (this.rows.session(owner.session_id).erased) return true;
    return this.ownStream(owner)?.erased === true;
  }

  /**
   * The key that seals the owner's content now, never created here: 'erased' for an erased owner,
   * undefined for one whose events were written in clear (a copy of them stays clear too).
   */
  existingKey(owner: KeyOwner): KeyState {
    if (this.rows.session(owner.session_id).erased) return 'erased';
    const sealing = this.sealingOwner(owner);
    const row =
      sealing.stream_id === null
        ? this.rows.session(sealing.session_id)
        : this.rows.stream(sealing.stream_id);
    if (row?.erased) return 'erased';
    return row?.key ?? undefined;
  }

  keyFor(owner: KeyOwner): DataKey {
    const existing = this.existingKey(owner);
    if (existing === 'erased')
      throw this.rows.session(owner.session_id).erased
        ? erasedSessionError(owner.session_id)
        : erasedStreamError(owner);
    if (existing) return existing;
    const created = this.rows.create(this.sealingOwner(owner));
    if (created === 'erased') throw erasedStreamError(owner);
    return created;
  }

  checkWritable(owner: KeyOwner): void {
    if (isSystemSession(owner.session_id)) return;
    if (this.rows.session(owner.session_id).erased) throw erasedSessionError(owner.session_id);
    if (this.ownStream(owner)?.erased) throw erasedStreamError(owner);
  }

  /** The owner's stream row when it is of the owner's session (a stream key serves its own session only). */
  private ownStream(owner: KeyOwner): StreamKeys | null {
    if (owner.stream_id === null) return null;
    const stream = this.rows.stream(owner.stream_id);
    return stream && stream.session_id === owner.session_id ? stream : null;
  }

  /** whose key seals the owner's events: a stream of another session (named by a system-stream event) is not, its session's is */
  private sealingOwner(owner: KeyOwner): KeyOwner {
    if (owner.stream_id === null) return owner;
    const stream = this.rows.stream(owner.stream_id);
    return stream && stream.session_id !== owner.session_id ? { ...owner, stream_id: null } : owner;
  }
}
