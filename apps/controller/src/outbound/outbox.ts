import { createHmac, timingSafeEqual } from 'node:crypto';
import { EventPayload, RuntimeEvent } from '@runledger/contracts';

/** Outbound deliveries of a task live in a stream of their own: a task's writer never meets them. */
export const OUTBOUND_STREAM_PREFIX = 'outbound:';
export const outboundStreamOf = (taskId: string): string => `${OUTBOUND_STREAM_PREFIX}${taskId}`;
export const taskOfOutboundStream = (streamId: string): string | null =>
  streamId.startsWith(OUTBOUND_STREAM_PREFIX) ? streamId.slice(OUTBOUND_STREAM_PREFIX.length) : null;

export type CallbackFormat = EventPayload<'CALLBACK_REGISTERED'>['format'];

/** One callback as its stream's events leave it. */
export interface CallbackState {
  callback_id: string;
  url: string;
  token: string | null;
  format: CallbackFormat;
  from_seq: number;
  removed: boolean;
  /** the task's last event whose update is settled (delivered or given up) */
  settled_seq: number;
  /** the update being delivered: its event and its attempts so far */
  current: {
    seq: number;
    attempts: number;
    /** an attempt claimed and not yet ended: nobody else sends before this */
    claimed_until: string | null;
    /** the last attempt failed: the next waits until then */
    retry_at: string | null;
  } | null;
  delivered: number;
  given_up: number;
}

export interface OutboxState {
  /** the outbound stream's last sequence: the expected version of the next claim */
  version: number;
  callbacks: Map<string, CallbackState>;
}

export const emptyOutbox = (): OutboxState => ({ version: 0, callbacks: new Map() });

/** The outbound stream folded: pure, so every instance and every restart sees the same deliveries. */
export function foldOutbox(events: readonly RuntimeEvent[], from: OutboxState = emptyOutbox()): OutboxState {
  const callbacks = new Map(from.callbacks);
  let version = from.version;
  for (const e of events) {
    version = e.sequence;
    switch (e.type) {
      case 'CALLBACK_REGISTERED':
        callbacks.set(e.payload.callback_id, {
          callback_id: e.payload.callback_id,
          url: e.payload.url,
          token: e.payload.token,
          format: e.payload.format,
          from_seq: e.payload.from_seq,
          removed: false,
          settled_seq: e.payload.from_seq,
          current: null,
          delivered: 0,
          given_up: 0,
        });
        break;
      case 'CALLBACK_REMOVED': {
        const c = callbacks.get(e.payload.callback_id);
        if (c) callbacks.set(c.callback_id, { ...c, removed: true });
        break;
      }
      case 'DELIVERY_STARTED': {
        const c = callbacks.get(e.payload.callback_id);
        if (!c || e.payload.seq <= c.settled_seq) break;
        callbacks.set(c.callback_id, {
          ...c,
          current: {
            seq: e.payload.seq,
            attempts: e.payload.attempt,
            claimed_until: e.payload.claimed_until,
            retry_at: null,
          },
        });
        break;
      }
      case 'DELIVERY_SUCCEEDED': {
        const c = callbacks.get(e.payload.callback_id);
        if (!c || e.payload.seq <= c.settled_seq) break;
        callbacks.set(c.callback_id, {
          ...c,
          settled_seq: e.payload.seq,
          current: null,
          delivered: c.delivered + 1,
        });
        break;
      }
      case 'DELIVERY_FAILED': {
        const c = callbacks.get(e.payload.callback_id);
        if (!c || e.payload.seq <= c.settled_seq) break;
        callbacks.set(
          c.callback_id,
          e.payload.retry_at === null
            ? { ...c, settled_seq: e.payload.seq, current: null, given_up: c.given_up + 1 }
            : {
                ...c,
                current: {
                  seq: e.payload.seq,
                  attempts: e.payload.attempt,
                  claimed_until: null,
                  retry_at: e.payload.retry_at,
                },
              },
        );
        break;
      }
      default:
        break;
    }
  }
  return { version, callbacks };
}

/** An update a callback is told of: the task event it stands for and the body sent. */
export interface Notification {
  seq: number;
  body: unknown;
}

export type NextDelivery =
  | { kind: 'send'; seq: number; attempt: number; body: unknown }
  | { kind: 'wait'; until: string }
  | { kind: 'idle' };

/**
 * What a callback needs next, given the task's notifications (in sequence order) and the time:
 * the first update past what is settled, once no other attempt holds it and its retry is due.
 */
export function nextDelivery(
  c: CallbackState,
  notifications: readonly Notification[],
  now: Date,
): NextDelivery {
  if (c.removed) return { kind: 'idle' };
  const next = notifications.find((n) => n.seq > c.settled_seq);
  if (!next) return { kind: 'idle' };
  const current = c.current?.seq === next.seq ? c.current : null;
  const blockedUntil = current?.claimed_until ?? current?.retry_at ?? null;
  if (blockedUntil !== null && Date.parse(blockedUntil) > now.getTime())
    return { kind: 'wait', until: blockedUntil };
  return { kind: 'send', seq: next.seq, attempt: (current?.attempts ?? 0) + 1, body: next.body };
}

export interface RetryPolicy {
  maxAttempts: number;
  /** the first retry's delay; each next one doubles, up to maxDelayMs */
  baseDelayMs: number;
  maxDelayMs: number;
}

/** When attempt `attempt` failed: the time of the next one, or null when none is left. */
export function retryAt(policy: RetryPolicy, attempt: number, now: Date): string | null {
  if (attempt >= policy.maxAttempts) return null;
  const delay = Math.min(policy.baseDelayMs * 2 ** (attempt - 1), policy.maxDelayMs);
  return new Date(now.getTime() + delay).toISOString();
}

/** The header a delivery is signed with: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">` (Stripe's shape). */
export const SIGNATURE_HEADER = 'runledger-signature';
export const DELIVERY_HEADER = 'runledger-delivery';

export function signatureOf(key: Buffer | string, body: string, unixSeconds: number): string {
  const mac = createHmac('sha256', key).update(`${unixSeconds}.${body}`).digest('hex');
  return `t=${unixSeconds},v1=${mac}`;
}

/** For receivers (and the tests): a signature made with `key` over `body`, in constant time. */
export function verifySignature(key: Buffer | string, body: string, header: string | undefined): boolean {
  const fields = Object.fromEntries(
    (header ?? '').split(',').map((f) => {
      const at = f.indexOf('=');
      return [f.slice(0, at).trim(), f.slice(at + 1).trim()];
    }),
  );
  const t = Number(fields.t);
  if (!Number.isSafeInteger(t) || typeof fields.v1 !== 'string') return false;
  const expected = Buffer.from(signatureOf(key, body, t));
  const given = Buffer.from(`t=${fields.t},v1=${fields.v1}`);
  return expected.length === given.length && timingSafeEqual(expected, given);
}
