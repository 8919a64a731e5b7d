import { KeyObject, createCipheriv, createDecipheriv, createSecretKey, randomBytes } from 'node:crypto';
import {
  ERASED_KEY,
  ERASED_VALUE,
  ErasedMark,
  RuntimeEvent,
  SEALED_KEY,
  isPersonalField,
  isSystemSession,
} from '@runledger/contracts';

/** A data key: 32 bytes for AES-256-GCM, and the id sealed values name it by. */
export interface DataKey {
  key_id: string;
  key: Buffer;
}

/** What opens a sealed value: its key, the tombstone of an erased one, or nothing (the key is missing). */
export type KeyState = DataKey | 'erased' | undefined;

/**
 * Whose key seals a payload: a stream's own key (`stream_id`: a task's stream, and every stream of
 * the tree's companions), so a task tree is erased by destroying the keys of its streams without
 * touching the session's other trees; or, for an event of the session on a system stream that names
 * no task, the session's own key (`stream_id` null). A session's erasure destroys all of them.
 */
export interface KeyOwner {
  session_id: string;
  stream_id: string | null;
}

/** An event as the key lookup needs it. */
export interface KeyedEvent {
  task_id: string;
  session_id: string;
  payload: unknown;
}

const stringAt = (value: unknown): string | null =>
  typeof value === 'string' && value.length > 0 ? value : null;

/**
 * The owner of a clear payload's key (see KeyOwner): its stream, unless that is a system stream
 * (the memory tools' inserts on `system:memory`), whose event belongs to the task it names
 * (`task_id`, or `metadata.task_id`), or else to its session.
 */
export function keyOwnerOf(e: KeyedEvent): KeyOwner {
  if (!isSystemSession(e.task_id)) return { session_id: e.session_id, stream_id: e.task_id };
  const p = e.payload as { task_id?: unknown; metadata?: { task_id?: unknown } } | null;
  return { session_id: e.session_id, stream_id: stringAt(p?.task_id) ?? stringAt(p?.metadata?.task_id) };
}

/**
 * The key store as readers see it. Both the event readers and the read models' sealed copies go
 * through keyStateOf / openText over one of these, so a key is looked up one way everywhere.
 */
export interface KeyReader {
  /** the key `keyId` of the session, 'erased' when it (or its session) was destroyed, undefined when unknown */
  sealedState(sessionId: string, keyId: string): KeyState;
  /** whether the owner's content was erased (its session's or its stream's keys destroyed) */
  erasedOwner(owner: KeyOwner): boolean;
}

/** The id of the key a sealed value (`v1.<key id>.<b64>`) was sealed under. */
export const keyIdOf = (sealed: string): string => sealed.split('.', 2)[1] ?? '';

/**
 * How an event's payload opens: erased when its owner was (its tree's or its session's keys
 * destroyed, whichever key sealed it), else by the key its sealed value names.
 */
export function keyStateOf(reader: KeyReader, e: KeyedEvent, anyErased = true): KeyState {
  if (anyErased && reader.erasedOwner(keyOwnerOf(e))) return 'erased';
  const sealed = (e.payload as Record<string, unknown> | null)?.[SEALED_KEY];
  return typeof sealed === 'string' ? reader.sealedState(e.session_id, keyIdOf(sealed)) : undefined;
}

/**
 * A personal field's value where it stands in a stored payload (its content is in the sealed text)
 * and once erased: of the same kind, so a reader that walks the payload's shape (a fold mapping a
 * list) still can; a text reads ERASED_VALUE (or `[sealed]` as stored).
 */
const placeholder = (value: unknown, text: string): unknown =>
  Array.isArray(value) ? [] : typeof value === 'object' && value !== null ? {} : text;
const SEALED_VALUE = '[sealed]';
const FORMAT = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;

export const newDataKey = (): DataKey => ({ key_id: randomBytes(8).toString('hex'), key: randomBytes(32) });

/**
 * The payload as stored: each personal field (isPersonalField) keeps its place with SEALED_VALUE,
 * and their values, as one JSON object, are AES-256-GCM encrypted under the session's key and
 * bound to the event id (AAD), in SEALED_KEY at the end. A payload without personal fields is
 * returned as it is.
 */
export function sealPayload(payload: unknown, key: DataKey, eventId: string): unknown {
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) return payload;
  const personal: Record<string, unknown> = {};
  const stored: Record<string, unknown> = {};
  let sealed = false;
  for (const [name, value] of Object.entries(payload)) {
    if (isPersonalField(name, value)) {
      personal[name] = value;
      stored[name] = placeholder(value, SEALED_VALUE);
      sealed = true;
    } else stored[name] = value;
  }
  if (!sealed) return payload;
  stored[SEALED_KEY] = encrypt(JSON.stringify(personal), key, eventId);
  return stored;
}

/** Random IVs drawn from a pool filled a few KB at a time: one random read per 256 events, not per event. */
const IV_POOL = 256;
let ivPool = Buffer.alloc(0);
let ivNext = IV_POOL;
function nextIv(): Buffer {
  if (ivNext === IV_POOL) {
    ivPool = randomBytes(IV_BYTES * IV_POOL);
    ivNext = 0;
  }
  return ivPool.subarray(IV_BYTES * ivNext, IV_BYTES * ++ivNext);
}

/** Each data key as a KeyObject, made once: a raw key would be imported again on every call. */
const keyObjects = new WeakMap<Buffer, KeyObject>();
function keyObjectOf(key: DataKey): KeyObject {
  let object = keyObjects.get(key.key);
  if (!object) keyObjects.set(key.key, (object = createSecretKey(key.key)));
  return object;
}

/** AES-256-GCM of `clear` under `key`, bound to `aad`: `v1.<key id>.<base64 of iv, tag, ciphertext>`. */
function encrypt(clear: string, key: DataKey, aad: string): string {
  const iv = nextIv();
  const cipher = createCipheriv('aes-256-gcm', keyObjectOf(key), iv);
  cipher.setAAD(Buffer.from(aad));
  const body = Buffer.concat([cipher.update(clear, 'utf8'), cipher.final()]);
  return `${FORMAT}.${key.key_id}.${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64')}`;
}

/** encrypt's reverse; null when `key` is not the one it names, or the text was altered. */
function decrypt(text: string, key: DataKey, aad: string): string | null {
  const [format, keyId, data] = text.split('.');
  if (format !== FORMAT || keyId !== key.key_id || !data) return null;
  const bytes = Buffer.from(data, 'base64');
  try {
    const decipher = createDecipheriv('aes-256-gcm', keyObjectOf(key), bytes.subarray(0, IV_BYTES));
    decipher.setAAD(Buffer.from(aad));
    decipher.setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString(
      'utf8',
    );
  } catch {
    return null;
  }
}

const SEALED_TEXT_PREFIX = `{"${SEALED_KEY}":`;

/**
 * A text a read model copied from an owner's events (a checkpoint's snapshot), sealed under the
 * owner's key: still JSON, `{"$sealed": ..., "session_id": ..., "stream_id": ...}`, so whoever reads
 * it back knows whose key opens it (the session is its AAD).
 */
export const sealText = (text: string, key: DataKey, owner: KeyOwner): string =>
  JSON.stringify({
    [SEALED_KEY]: encrypt(text, key, owner.session_id),
    session_id: owner.session_id,
    ...(owner.stream_id === null ? {} : { stream_id: owner.stream_id }),
  });

/**
 * The owner a sealText result belongs to; null for a text stored in clear (a person's own text
 * that merely begins like a sealed one, e.g. an input, included).
 */
export function sealedTextOwner(text: string): KeyOwner | null {
  if (!text.startsWith(SEALED_TEXT_PREFIX)) return null;
  try {
    const parsed = JSON.parse(text) as Record<string, unknown>;
    const keys = Object.keys(parsed);
    const stream = parsed.stream_id;
    const shaped =
      typeof parsed[SEALED_KEY] === 'string' &&
      typeof parsed.session_id === 'string' &&
      (keys.length === 2 || (keys.length === 3 && typeof stream === 'string'));
    return shaped
      ? { session_id: parsed.session_id as string, stream_id: (stream as string | undefined) ?? null }
      : null;
  } catch {
    return null;
  }
}

/** sealText's reverse through the key store: the text in clear, or null (erased, key missing). */
export function openText(text: string, reader: KeyReader | null): string | null {
  const owner = sealedTextOwner(text);
  if (owner === null) return text;
  const sealed = (JSON.parse(text) as Record<string, string>)[SEALED_KEY];
  if (!reader || reader.erasedOwner(owner)) return null;
  const state = reader.sealedState(owner.session_id, keyIdOf(sealed));
  if (!state || state === 'erased') return null;
  return decrypt(sealed, state, owner.session_id);
}

const isSealed = (payload: unknown): payload is Record<string, unknown> =>
  typeof (payload as Record<string, unknown> | null)?.[SEALED_KEY] === 'string';

/** The sealed fields' values, or null when `key` is not the one they were sealed under (or they were altered). */
function unseal(text: string, key: DataKey, eventId: string): Record<string, unknown> | null {
  const clear = decrypt(text, key, eventId);
  return clear === null ? null : (JSON.parse(clear) as Record<string, unknown>);
}

/** The payload with its personal fields as ERASED_VALUE and the mark saying why. */
function erasedPayload(payload: Record<string, unknown>, mark: ErasedMark): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(payload)) {
    if (name === SEALED_KEY) continue;
    out[name] = isPersonalField(name, value) ? placeholder(value, ERASED_VALUE) : value;
  }
  out[ERASED_KEY] = mark;
  return out;
}

/**
 * The payload as readers get it: sealed fields opened with the session's key; with no key for a
 * sealed payload, or with an erased session's (sealed or clear) payload, the personal fields read
 * ERASED_VALUE and ERASED_KEY says why. Anything else is returned as it is.
 */
export function openPayload(payload: unknown, state: KeyState, eventId: string): unknown {
  if (!isSealed(payload)) {
    if (state !== 'erased' || payload === null || typeof payload !== 'object' || Array.isArray(payload))
      return payload;
    return erasedPayload(payload as Record<string, unknown>, 'erased');
  }
  if (state === 'erased') return erasedPayload(payload, 'erased');
  const personal = state ? unseal(payload[SEALED_KEY] as string, state, eventId) : null;
  if (!personal) return erasedPayload(payload, 'key_missing');
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(payload)) {
    if (name === SEALED_KEY) continue;
    out[name] = Object.hasOwn(personal, name) ? personal[name] : value;
  }
  return out;
}

/**
 * Events as readers get them (openPayload each). `anyErased` false lets a store with no erasure
 * skip the lookup for clear events; events that need nothing are returned as they are.
 */
export function openEvents(events: RuntimeEvent[], reader: KeyReader, anyErased: boolean): RuntimeEvent[] {
  for (let i = 0; i < events.length; i++) {
    const e = events[i];
    if (!isSealed(e.payload) && !anyErased) continue;
    const state = keyStateOf(reader, e, anyErased);
    if (!isSealed(e.payload) && state !== 'erased') continue;
    events[i] = { ...e, payload: openPayload(e.payload, state, e.event_id) } as RuntimeEvent;
  }
  return events;
}

const STRING_IN_JSON = '"((?:[^"\\\\]|\\\\.)*)"';
const TASK_IN_JSON = new RegExp(`"task_id":${STRING_IN_JSON}`);
const SESSION_IN_JSON = new RegExp(`"session_id":${STRING_IN_JSON}`);
const SEALED_IN_JSON = `"${SEALED_KEY}":`;

/**
 * Stored event JSON as readers get it: text with no sealed payload, whose owner was not erased, is
 * returned as it is; the rest is parsed, opened and serialised again (same key order). The envelope's
 * ids come before its payload, so the first task_id and session_id are the envelope's.
 */
export function openEventJson(json: string, reader: KeyReader, anyErased: boolean): string {
  const sealed = json.includes(SEALED_IN_JSON);
  if (!sealed && !anyErased) return json;
  if (!sealed) {
    const task = TASK_IN_JSON.exec(json);
    const session = SESSION_IN_JSON.exec(json);
    const stream = task ? (JSON.parse(`"${task[1]}"`) as string) : null;
    // a system stream's owner is in its payload: parse it below
    if (session && stream !== null && !isSystemSession(stream)) {
      const owner = { session_id: JSON.parse(`"${session[1]}"`) as string, stream_id: stream };
      if (!reader.erasedOwner(owner)) return json;
    }
  }
  const event = JSON.parse(json) as RuntimeEvent;
  const [opened] = openEvents([event], reader, anyErased);
  return opened === event ? json : JSON.stringify(opened);
}
