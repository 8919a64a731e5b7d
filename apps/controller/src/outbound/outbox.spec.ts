import { RuntimeEvent } from '@runledger/contracts';
import { foldOutbox, nextDelivery, retryAt, signatureOf, verifySignature } from './outbox';

let seq = 0;
const ev = (type: string, payload: Record<string, unknown>): RuntimeEvent =>
  ({
    event_id: `evt_${++seq}`,
    task_id: 'outbound:task_1',
    session_id: 'sess_1',
    sequence: seq,
    position: seq,
    type,
    payload,
    causation_id: null,
    correlation_id: 'c',
    created_at: new Date(0).toISOString(),
  }) as RuntimeEvent;

const registered = () =>
  ev('CALLBACK_REGISTERED', {
    callback_id: 'cb_1',
    task_id: 'task_1',
    url: 'http://127.0.0.1:1/hook',
    token: null,
    format: 'runledger',
    from_seq: 0,
  });
const notes = [
  { seq: 1, body: { n: 1 } },
  { seq: 4, body: { n: 4 } },
];
const now = new Date('2026-01-01T00:00:00.000Z');

describe('outbox fold and next delivery', () => {
  beforeEach(() => (seq = 0));

  it('a new callback sends its first update, attempt 1', () => {
    const sut = foldOutbox([registered()]).callbacks.get('cb_1')!;
    expect(nextDelivery(sut, notes, now)).toEqual({ kind: 'send', seq: 1, attempt: 1, body: { n: 1 } });
  });

  it('a claimed attempt holds the update until its claim runs out; then attempt 2', () => {
    const later = new Date(now.getTime() + 1000).toISOString();
    const sut = foldOutbox([
      registered(),
      ev('DELIVERY_STARTED', {
        delivery_id: 'd1',
        callback_id: 'cb_1',
        seq: 1,
        attempt: 1,
        claimed_until: later,
      }),
    ]).callbacks.get('cb_1')!;
    expect(nextDelivery(sut, notes, now)).toEqual({ kind: 'wait', until: later });
    expect(nextDelivery(sut, notes, new Date(now.getTime() + 2000))).toMatchObject({
      kind: 'send',
      seq: 1,
      attempt: 2,
    });
  });

  it('a failure waits for its retry; a success moves on to the next update; giving up moves on too', () => {
    const retry = new Date(now.getTime() + 500).toISOString();
    const failed = foldOutbox([
      registered(),
      ev('DELIVERY_STARTED', {
        delivery_id: 'd1',
        callback_id: 'cb_1',
        seq: 1,
        attempt: 1,
        claimed_until: retry,
      }),
      ev('DELIVERY_FAILED', {
        delivery_id: 'd1',
        callback_id: 'cb_1',
        seq: 1,
        attempt: 1,
        status_code: 500,
        error: 'x',
        retry_at: retry,
      }),
    ]);
    expect(nextDelivery(failed.callbacks.get('cb_1')!, notes, now)).toEqual({ kind: 'wait', until: retry });
    const delivered = foldOutbox(
      [
        ev('DELIVERY_SUCCEEDED', {
          delivery_id: 'd2',
          callback_id: 'cb_1',
          seq: 1,
          attempt: 2,
          status_code: 200,
          duration_ms: 1,
        }),
      ],
      failed,
    );
    expect(delivered.version).toBe(4);
    expect(nextDelivery(delivered.callbacks.get('cb_1')!, notes, now)).toMatchObject({
      kind: 'send',
      seq: 4,
      attempt: 1,
    });
    const givenUp = foldOutbox(
      [
        ev('DELIVERY_FAILED', {
          delivery_id: 'd3',
          callback_id: 'cb_1',
          seq: 4,
          attempt: 8,
          status_code: null,
          error: 'x',
          retry_at: null,
        }),
      ],
      delivered,
    ).callbacks.get('cb_1')!;
    expect(givenUp).toMatchObject({ settled_seq: 4, delivered: 1, given_up: 1 });
    expect(nextDelivery(givenUp, notes, now)).toEqual({ kind: 'idle' });
  });

  it('a removed callback and one registered after an update are not sent it', () => {
    const removed = foldOutbox([
      registered(),
      ev('CALLBACK_REMOVED', { callback_id: 'cb_1', task_id: 'task_1' }),
    ]);
    expect(nextDelivery(removed.callbacks.get('cb_1')!, notes, now)).toEqual({ kind: 'idle' });
    const late = foldOutbox([
      ev('CALLBACK_REGISTERED', { ...registered().payload, from_seq: 2 }),
    ]).callbacks.get('cb_1')!;
    expect(nextDelivery(late, notes, now)).toMatchObject({ kind: 'send', seq: 4 });
  });

  it('backoff doubles up to its cap; no retry is left after the last attempt', () => {
    const policy = { maxAttempts: 4, baseDelayMs: 100, maxDelayMs: 250 };
    expect(retryAt(policy, 1, now)).toBe(new Date(now.getTime() + 100).toISOString());
    expect(retryAt(policy, 2, now)).toBe(new Date(now.getTime() + 200).toISOString());
    expect(retryAt(policy, 3, now)).toBe(new Date(now.getTime() + 250).toISOString());
    expect(retryAt(policy, 4, now)).toBeNull();
  });

  it('a signature verifies with its key and body only', () => {
    const header = signatureOf('k'.repeat(20), '{"a":1}', 1700000000);
    expect(header).toMatch(/^t=1700000000,v1=[0-9a-f]{64}$/);
    expect(verifySignature('k'.repeat(20), '{"a":1}', header)).toBe(true);
    expect(verifySignature('k'.repeat(20), '{"a":2}', header)).toBe(false);
    expect(verifySignature('j'.repeat(20), '{"a":1}', header)).toBe(false);
    expect(verifySignature('k'.repeat(20), '{"a":1}', undefined)).toBe(false);
  });
});
