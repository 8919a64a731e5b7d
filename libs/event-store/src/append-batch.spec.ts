import { NewEvent, ValidationError } from '@runledger/contracts';
import { buildEnvelopes, checkNewEvent, positioned, validateBatch, writerChecked } from './append-batch';
import { taskCompleted } from './testing/events';

const chunk = (delta: unknown, event_id?: string): NewEvent =>
  ({
    type: 'OUTPUT_CHUNK',
    payload: { call_id: 'c', index: 0, delta },
    ...(event_id ? { event_id } : {}),
  }) as NewEvent;
const completed = (event_id: string): NewEvent =>
  ({
    type: 'TASK_COMPLETED',
    event_id,
    payload: {
      stop_reason: 'completed',
      detail: 'ok',
      usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
    },
  }) as unknown as NewEvent;

describe('validateBatch and events their writer checked', () => {
  it('an event from any other caller is checked in full, even one shaped like a checked one', () => {
    expect(() => validateBatch('t1', [chunk(42, 'evt_1')], 'any')).toThrow(ValidationError);
    expect(() => validateBatch('t1', [chunk('x', 'evt\u0000nul')], 'any')).toThrow(/NUL/);
    expect(() => validateBatch('t1', [{ ...chunk('x', 'evt_1'), created_at: 'yesterday' }], 'any')).toThrow(
      /timestamp/,
    );
    // a copy of a checked event (a store in front changed it on its way) is another object: checked again
    const checked = writerChecked(chunk('x', 'evt_1'));
    expect(() => validateBatch('t1', [{ ...checked, payload: { call_id: 'c' } } as NewEvent], 'any')).toThrow(
      ValidationError,
    );
  });

  it('an event its writer checked is taken as checked; the batch checks still run over it', () => {
    // what the writer vouches for is not parsed again (here it vouches for what checkNewEvent would refuse)
    const vouched = writerChecked(chunk(42, 'evt_vouched'));
    expect(validateBatch('t1', [vouched], 'any')[0]).toMatchObject({
      event_id: 'evt_vouched',
      id_supplied: true,
    });
    expect(() => checkNewEvent(chunk(42, 'evt_vouched'))).toThrow(ValidationError);
    // frozen: a change would make it another event than the one checked
    expect(() => Object.assign(vouched, { type: 'TASK_FAILED' })).toThrow(TypeError);
    const a = writerChecked(chunk('a', 'evt_a'));
    expect(() => validateBatch('t1', [a, writerChecked(chunk('b', 'evt_a'))], 'any')).toThrow(/twice/);
    expect(() => validateBatch('t1', [writerChecked(completed('evt_end')), a], 'any')).toThrow(
      /follows the final/,
    );
    expect(() => validateBatch('', [a], 'any')).toThrow(ValidationError);
    expect(() => validateBatch('t1', [a], -1 as never)).toThrow(ValidationError);
    expect(() => writerChecked(chunk('x'))).toThrow(/carries its id/);
  });
});

describe('positioned', () => {
  it('is the envelope with its position, every key in the order the spread gives', () => {
    const batch = validateBatch('t1', [chunk('x', 'evt_1'), taskCompleted()], 3);
    const envelopes = buildEnvelopes(
      't1',
      batch,
      { version: 3, session_id: 'ses_1', last_type: 'OUTPUT_CHUNK' },
      '2026-01-01T00:00:00.000Z',
    );
    for (const [i, e] of envelopes.entries()) {
      const stored = positioned(e, 40 + i);
      expect(Object.keys(stored)).toEqual(Object.keys({ ...e, position: 40 + i }));
      expect(JSON.stringify(stored)).toBe(JSON.stringify({ ...e, position: 40 + i }));
    }
  });
});
