import { KeyObject, createCipheriv, createDecipheriv, createSecretKey, randomBytes } from 'node:crypto';
import {
  ERASED_KEY,
  ERASED_VALUE,
  ErasedMark,
  RuntimeEvent,
  SEALED_KEY,
  isPersonalField,
} from '@runledger/contracts';

/** A session's data key: 32 bytes for AES-256-GCM, and the id sealed payloads name it by. */
export interface DataKey {
  key_id: string;
  key: Buffer;
}

/** What the key store holds for a session: its key, the tombstone of an erased one, or nothing. */
export type KeyState = DataKey | 'erased' | undefined;

/** Looks a session's key up, as the key store holds it at the moment of the read. */
export type KeyLookup = (sessionId: string) => KeyState;

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
 * A text a read model copied from a session's events (a checkpoint's snapshot), sealed under the
 * session's key: still JSON, `{"$sealed": ..., "session_id": ...}`, so whoever reads it back knows
 * whose key opens it.
 */
export const sealText = (text: string, key: DataKey, sessionId: string): string =>
  JSON.stringify({ [SEALED_KEY]: encrypt(text, key, sessionId), session_id: sessionId });

/**
 * The session a sealText result belongs to; null for a text stored in clear (a person's own text
 * that merely begins like a sealed one, e.g. an input, included).
 */
export function sealedTextSession(text: string): string | null {
  if (!text.startsWith(SEALED_TEXT_PREFIX)) return null;
  try {
    const parsed = JSON.parse(text) as Record<string, unknown>;
    const keys = Object.keys(parsed);
    return keys.length === 2 &&
      typeof parsed[SEALED_KEY] === 'string' &&
      typeof parsed.session_id === 'string'
      ? parsed.session_id
      : null;
  } catch {
    return null;
  }
}

/** sealText's reverse under its session's key state: the text in clear, or null (erased, key missing). */
export function openText(text: string, state: KeyState): string | null {
  const session = sealedTextSession(text);
  if (session === null) return text;
  if (!state || state === 'erased') return null;
  return decrypt((JSON.parse(text) as Record<string, string>)[SEALED_KEY], state, session);
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

/** Whether `event` reads differently through the key store: it is sealed, or its session is erased. */
const needsOpening = (event: RuntimeEvent, erased: boolean): boolean => isSealed(event.payload) || erased;

/**
 * Events as readers get them (openPayload each). `anyErased` false lets a store with no erasure
 * skip the lookup for clear events; events that need nothing are returned as they are.
 */
export function openEvents(events: RuntimeEvent[], lookup: KeyLookup, anyErased: boolean): RuntimeEvent[] {
  for (let i = 0; i < events.length; i++) {
    const e = events[i];
    const sealed = isSealed(e.payload);
    if (!sealed && !anyErased) continue;
    const state = lookup(e.session_id);
    if (!needsOpening(e, state === 'erased')) continue;
    events[i] = { ...e, payload: openPayload(e.payload, state, e.event_id) } as RuntimeEvent;
  }
  return events;
}

const SESSION_IN_JSON = /"session_id":("(?:[^"\\]|\\.)*")/;
const SEALED_IN_JSON = `"${SEALED_KEY}":`;

/**
 * Stored event JSON as readers get it: text with no sealed payload, of a session not erased, is
 * returned as it is; the rest is parsed, opened and serialised again (same key order).
 */
export function openEventJson(json: string, lookup: KeyLookup, anyErased: boolean): string {
  const sealed = json.includes(SEALED_IN_JSON);
  if (!sealed && !anyErased) return json;
  if (!sealed) {
    const session = SESSION_IN_JSON.exec(json);
    if (!session || lookup(JSON.parse(session[1]) as string) !== 'erased') return json;
  }
  const event = JSON.parse(json) as RuntimeEvent;
  const [opened] = openEvents([event], lookup, anyErased);
  return opened === event ? json : JSON.stringify(opened);
}
