import { RuntimeEvent, SEALED_KEY, isSystemSession } from '@runledger/contracts';
import { KeyRules, SessionRow, StreamRow, sessionKeysOf, streamKeysOf } from './key-rules';
import { WriteKeys } from './payload-sealer';
import {
  DataKey,
  KeyOwner,
  KeyedEvent,
  keyIdOf,
  keyOwnerOf,
  newDataKey,
  openEvents,
  openText,
  sealedTextOwner,
} from './sealed-payload';

/** A pool or a transaction's client: whatever runs a query. */
export interface Queryable {
  query<R extends object>(text: string, values?: unknown[]): Promise<{ rows: R[] }>;
}

/** A row of `data_keys` (stream_id null: a session's) or of `stream_keys`, as keyRowsSql reads them together. */
export interface KeyRow extends SessionRow {
  session_id: string;
  stream_id: string | null;
}

/** A key an append group created, for keysInsertSql. */
export type CreatedKey = KeyOwner & DataKey;

/**
 * The key rules over rows read at once (a read, or an append group under the append lock). With
 * `create`, an owner without a key gets a fresh one, listed for the caller to insert.
 */
export function rulesOver(rows: readonly KeyRow[], create?: (owner: KeyOwner) => DataKey): KeyRules {
  const sessions = new Map<string, KeyRow>();
  const streams = new Map<string, StreamRow>();
  const keyIds = new Map<string, StreamRow>();
  const add = (r: KeyRow) => {
    if (r.stream_id === null) return sessions.set(r.session_id, r);
    const row = r as StreamRow;
    streams.set(row.stream_id, row);
    if (row.key_id) keyIds.set(row.key_id, row);
  };
  rows.forEach(add);
  return new KeyRules({
    session: (id) => sessionKeysOf(sessions.get(id)),
    stream: (id) => streamKeysOf(streams.get(id)),
    byKeyId: (id) => streamKeysOf(keyIds.get(id)),
    create(owner) {
      if (!create) throw new Error(`no data key was loaded for ${owner.stream_id ?? owner.session_id}`);
      const fresh = create(owner);
      add({ ...owner, ...fresh, erased_at: null });
      return fresh;
    },
  });
}

const subjects = (sessions: Iterable<string>): string[] =>
  [...new Set(sessions)].filter((s) => !isSystemSession(s));

const KEY_COLUMNS = 'session_id, key_id, key, erased_at';

/** Both tables' rows of `sessions` (their own rows), and of the streams named or sealing one of `keyIds`. */
export const keyRowsSql = (sessions: string, streams: string, keyIds = 'ARRAY[]::text[]'): string =>
  `SELECT ${KEY_COLUMNS}, NULL::text AS stream_id FROM data_keys WHERE session_id = ANY(${sessions})
   UNION ALL
   SELECT ${KEY_COLUMNS}, stream_id FROM stream_keys WHERE stream_id = ANY(${streams}) OR key_id = ANY(${keyIds})`;

/** The key store as it holds `events`' keys now, and whether any of them reads erased. */
export async function loadKeys(
  db: Queryable,
  events: readonly KeyedEvent[],
): Promise<{ reader: KeyRules; anyErased: boolean }> {
  const sessions = subjects(events.map((e) => e.session_id));
  if (sessions.length === 0) return { reader: rulesOver([]), anyErased: false };
  const keyIds = new Set<string>();
  const streams = new Set<string>();
  for (const e of events) {
    const sealed = (e.payload as Record<string, unknown> | null)?.[SEALED_KEY];
    if (typeof sealed === 'string') keyIds.add(keyIdOf(sealed));
    const owner = keyOwnerOf(e).stream_id;
    if (owner !== null) streams.add(owner);
  }
  const { rows } = await db.query<KeyRow>(keyRowsSql('$1', '$2', '$3'), [
    sessions,
    [...streams],
    [...keyIds],
  ]);
  return { reader: rulesOver(rows), anyErased: rows.some((r) => r.erased_at !== null) };
}

/**
 * Events as readers get them on PostgreSQL: sealed payloads opened, erased owners' content marked.
 * The keys are read on every read, not cached: another instance's erasure is seen by the next read here.
 */
export async function openedPg(db: Queryable, events: RuntimeEvent[]): Promise<RuntimeEvent[]> {
  if (events.length === 0) return events;
  const { reader, anyErased } = await loadKeys(db, events);
  return openEvents(events, reader, anyErased);
}

/** Read models' sealed copies (sealText) as readers get them on PostgreSQL, with one read of their keys. */
export async function openCopiesPg(
  db: Queryable,
  texts: readonly (string | null)[],
): Promise<(string | null)[]> {
  const owners = texts.map((t) => (t === null ? null : sealedTextOwner(t)));
  if (owners.every((o) => o === null)) return [...texts];
  const { reader } = await loadKeys(
    db,
    texts.flatMap((t, i) => {
      const owner = owners[i];
      return owner === null
        ? []
        : [
            {
              session_id: owner.session_id,
              task_id: owner.stream_id ?? owner.session_id,
              payload: JSON.parse(t!) as unknown,
            },
          ];
    }),
  );
  return texts.map((t, i) => (owners[i] === null ? t : openText(t!, reader)));
}

/**
 * The writer's keys for an append group whose key rows were read under the append lock (`rows`):
 * an owner without a key gets a fresh one when `seal`, listed in `created` for the caller to insert
 * in the same transaction (an erasure takes the append lock too, so nothing slips between). An
 * erased owner's appends are refused by `keyFor` / `checkWritable`.
 */
export function groupKeys(rows: readonly KeyRow[], seal: boolean): WriteKeys & { created: CreatedKey[] } {
  const created: CreatedKey[] = [];
  const rules = rulesOver(rows, (owner) => {
    if (!seal) throw new Error('keyFor without sealing');
    const fresh = newDataKey();
    created.push({ ...owner, ...fresh });
    return fresh;
  });
  return {
    created,
    keyFor: (owner) => rules.keyFor(owner),
    checkWritable: (owner) => rules.checkWritable(owner),
    existingKey: (owner) => rules.existingKey(owner),
    sealedState: (sessionId, keyId) => rules.sealedState(sessionId, keyId),
    erasedOwner: (owner) => rules.erasedOwner(owner),
  };
}

/**
 * The key rows an append group may write with: its streams' sessions, the sessions its events name,
 * and the streams that own its events (its streams, and the tasks system-stream events name).
 */
export const groupKeysSql = (taskIds: string, sessionIds: string, streamIds: string): string =>
  keyRowsSql(
    `${sessionIds} || ARRAY(SELECT session_id FROM events WHERE task_id = ANY(${taskIds}) AND sequence = 1)`,
    streamIds,
  );

/** The streams whose keys may seal these events (keyOwnerOf each), for groupKeysSql. */
export const owningStreams = (events: readonly KeyedEvent[]): string[] => [
  ...new Set(events.map((e) => keyOwnerOf(e).stream_id).filter((s): s is string => s !== null)),
];

const quote = (value: string): string => `'${value.replace(/'/g, "''")}'`;

/** How many statements keysInsertSql makes of `created`. */
export const keyInserts = (created: readonly CreatedKey[]): number =>
  Number(created.some((k) => k.stream_id === null)) + Number(created.some((k) => k.stream_id !== null));

/** The keys an append group created, inserted in its transaction (with a `; ` after), or nothing. */
export function keysInsertSql(created: readonly CreatedKey[]): string {
  if (created.length === 0) return '';
  const now = quote(new Date().toISOString());
  const key = (k: CreatedKey) =>
    `${quote(k.key_id)}, decode(${quote(k.key.toString('base64'))}, 'base64'), ${now}`;
  const sessions = created.filter((k) => k.stream_id === null);
  const streams = created.filter((k) => k.stream_id !== null);
  return [
    sessions.length > 0
      ? `INSERT INTO data_keys (session_id, key_id, key, created_at) VALUES ${sessions
          .map((k) => `(${quote(k.session_id)}, ${key(k)})`)
          .join(', ')}; `
      : '',
    streams.length > 0
      ? `INSERT INTO stream_keys (stream_id, session_id, key_id, key, created_at) VALUES ${streams
          .map((k) => `(${quote(k.stream_id!)}, ${quote(k.session_id)}, ${key(k)})`)
          .join(', ')}; `
      : '',
  ].join('');
}

/**
 * Destroys a session's key and its streams' keys in `client`'s transaction, leaving the tombstones.
 * False when it was erased before. The old row versions stay in the tables' pages until VACUUM (see
 * erasure).
 */
export async function eraseSessionKeys(client: Queryable, sessionId: string, at: string): Promise<boolean> {
  const session = await client.query<{ session_id: string }>(
    `INSERT INTO data_keys (session_id, key_id, key, created_at, erased_at) VALUES ($1, NULL, NULL, $2, $2)
     ON CONFLICT (session_id) DO UPDATE SET key = NULL, erased_at = excluded.erased_at
     WHERE data_keys.erased_at IS NULL
     RETURNING session_id`,
    [sessionId, at],
  );
  const streams = await client.query<{ stream_id: string }>(
    `UPDATE stream_keys SET key = NULL, erased_at = $2 WHERE session_id = $1 AND erased_at IS NULL RETURNING stream_id`,
    [sessionId, at],
  );
  return session.rows.length + streams.rows.length > 0;
}

/**
 * Destroys the keys of a task tree's streams in `client`'s transaction, leaving a tombstone for each
 * (also for a stream written in clear, which had none). Returns how many were not erased before.
 */
export async function eraseStreamKeys(
  client: Queryable,
  sessionId: string,
  streamIds: readonly string[],
  at: string,
): Promise<number> {
  if (streamIds.length === 0) return 0;
  const { rows } = await client.query<{ stream_id: string }>(
    `INSERT INTO stream_keys (stream_id, session_id, key_id, key, created_at, erased_at)
     SELECT s, $2, NULL, NULL, $3, $3 FROM unnest($1::text[]) AS s
     ON CONFLICT (stream_id) DO UPDATE SET key = NULL, erased_at = excluded.erased_at
     WHERE stream_keys.erased_at IS NULL
     RETURNING stream_id`,
    [streamIds, sessionId, at],
  );
  return rows.length;
}
