import { RuntimeEvent, isSystemSession } from '@runledger/contracts';
import { WriteKeys } from './payload-sealer';
import { DataKey, KeyState, newDataKey, openEvents, openText, sealedTextSession } from './sealed-payload';
import { erasedSessionError } from './sqlite-data-keys';

/** A pool or a transaction's client: whatever runs a query. */
export interface Queryable {
  query<R extends object>(text: string, values?: unknown[]): Promise<{ rows: R[] }>;
}

export interface KeyRow {
  session_id: string;
  key_id: string | null;
  key: Buffer | null;
  erased_at: string | null;
}

export const stateOf = (row: KeyRow | undefined): KeyState => {
  if (!row) return undefined;
  if (row.erased_at !== null || !row.key || !row.key_id) return 'erased';
  return { key_id: row.key_id, key: row.key };
};

const subjects = (sessions: Iterable<string>): string[] =>
  [...new Set(sessions)].filter((s) => !isSystemSession(s));

/**
 * The data keys of `sessions` as the table holds them now. Read on every read of events, not
 * cached: another instance's erasure is seen by the next read here.
 */
export async function loadKeys(db: Queryable, sessions: Iterable<string>): Promise<Map<string, KeyState>> {
  const ids = subjects(sessions);
  if (ids.length === 0) return new Map();
  const { rows } = await db.query<KeyRow>(
    'SELECT session_id, key_id, key, erased_at FROM data_keys WHERE session_id = ANY($1)',
    [ids],
  );
  const byId = new Map(rows.map((r) => [r.session_id, r]));
  return new Map(ids.map((id) => [id, stateOf(byId.get(id))]));
}

/** Events as readers get them on PostgreSQL: sealed payloads opened, erased sessions' content marked. */
export async function openedPg(db: Queryable, events: RuntimeEvent[]): Promise<RuntimeEvent[]> {
  if (events.length === 0) return events;
  const keys = await loadKeys(
    db,
    events.map((e) => e.session_id),
  );
  const anyErased = [...keys.values()].includes('erased');
  return openEvents(events, (s) => keys.get(s), anyErased);
}

/** Read models' sealed copies (sealText) as readers get them on PostgreSQL, with one read of their keys. */
export async function openCopiesPg(
  db: Queryable,
  texts: readonly (string | null)[],
): Promise<(string | null)[]> {
  const sessions = texts.map((t) => (t === null ? null : sealedTextSession(t)));
  if (sessions.every((s) => s === null)) return [...texts];
  const keys = await loadKeys(
    db,
    sessions.filter((s): s is string => s !== null),
  );
  return texts.map((t, i) => (sessions[i] === null ? t : openText(t!, keys.get(sessions[i]!))));
}

/**
 * The writer's keys for an append group whose key rows were read under the append lock (`rows`):
 * a session without a key gets a fresh one when `seal`, listed in `created` for the caller to insert
 * in the same transaction. An erased session's appends are refused by `keyFor` / `checkWritable`.
 */
export function groupKeys(
  rows: readonly KeyRow[],
  seal: boolean,
): WriteKeys & { created: Array<{ session_id: string } & DataKey> } {
  const states = new Map(rows.map((r) => [r.session_id, stateOf(r)]));
  const created: Array<{ session_id: string } & DataKey> = [];
  return {
    created,
    keyFor(sessionId: string): DataKey {
      const state = states.get(sessionId);
      if (state === 'erased') throw erasedSessionError(sessionId);
      if (state) return state;
      if (!seal) throw new Error('keyFor without sealing');
      const fresh = newDataKey();
      states.set(sessionId, fresh);
      created.push({ session_id: sessionId, ...fresh });
      return fresh;
    },
    checkWritable(sessionId: string): void {
      if (states.get(sessionId) === 'erased') throw erasedSessionError(sessionId);
    },
    state: (sessionId: string): KeyState => states.get(sessionId),
  };
}

/** The key rows an append group may write with: its streams' sessions and those its events name. */
export const groupKeysSql = (taskIds: string, sessionIds: string): string =>
  `SELECT session_id, key_id, key, erased_at FROM data_keys
   WHERE session_id = ANY(${sessionIds})
      OR session_id IN (SELECT session_id FROM events WHERE task_id = ANY(${taskIds}) AND sequence = 1)`;

/**
 * Inside an append transaction: the keys of the sessions it writes to, created for those without
 * one when `seal` (in the transaction, so a key is never committed without its first events or
 * the other way round), read FOR SHARE so an erasure waits for this append and the next append
 * after it sees the tombstone.
 */
export async function writeKeys(
  client: Queryable,
  sessions: Iterable<string>,
  seal: boolean,
): Promise<WriteKeys> {
  const ids = subjects(sessions);
  if (ids.length > 0 && seal) {
    const fresh = ids.map(() => newDataKey());
    await client.query(
      `INSERT INTO data_keys (session_id, key_id, key, created_at)
       SELECT s, k, decode(v, 'base64'), $4 FROM unnest($1::text[], $2::text[], $3::text[]) AS t(s, k, v)
       ON CONFLICT (session_id) DO NOTHING`,
      [ids, fresh.map((k) => k.key_id), fresh.map((k) => k.key.toString('base64')), new Date().toISOString()],
    );
  }
  const rows =
    ids.length === 0
      ? []
      : (
          await client.query<KeyRow>(
            'SELECT session_id, key_id, key, erased_at FROM data_keys WHERE session_id = ANY($1) FOR SHARE',
            [ids],
          )
        ).rows;
  const states = new Map(rows.map((r) => [r.session_id, stateOf(r)]));
  return {
    keyFor(sessionId: string): DataKey {
      const state = states.get(sessionId);
      if (state === 'erased') throw erasedSessionError(sessionId);
      if (!state) throw new Error(`no data key was loaded for session ${sessionId}`);
      return state;
    },
    checkWritable(sessionId: string): void {
      if (states.get(sessionId) === 'erased') throw erasedSessionError(sessionId);
    },
    state: (sessionId: string): KeyState => states.get(sessionId),
  };
}

/**
 * Destroys a session's key in `client`'s transaction, leaving the tombstone. False when it was
 * erased before. The old row version stays in the table's pages until VACUUM (see erasure).
 */
export async function eraseKey(client: Queryable, sessionId: string, at: string): Promise<boolean> {
  const { rows } = await client.query<{ session_id: string }>(
    `INSERT INTO data_keys (session_id, key_id, key, created_at, erased_at) VALUES ($1, NULL, NULL, $2, $2)
     ON CONFLICT (session_id) DO UPDATE SET key_id = NULL, key = NULL, erased_at = excluded.erased_at
     WHERE data_keys.erased_at IS NULL
     RETURNING session_id`,
    [sessionId, at],
  );
  return rows.length > 0;
}
