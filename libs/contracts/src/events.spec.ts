import { ValidationError } from './errors';
import { parseEventBody } from './events';

describe('parseEventBody', () => {
  const called = { call_id: 'call_1', tool: 'echo', args: { text: 'hi' }, args_hash: 'h' };

  it('fills defaults, and parsing its own output again returns that same payload', () => {
    const first = parseEventBody({ type: 'TOOL_CALLED', payload: called });
    expect(first.payload).toMatchObject({ step_id: null, idempotent: false, attempt: 1 });
    expect(first.payload).not.toBe(called);
    const again = parseEventBody({ type: 'TOOL_CALLED', payload: first.payload });
    expect(again.payload).toBe(first.payload);
  });

  it('validates a parsed payload given as another type, and a copy of one', () => {
    const parsed = parseEventBody({ type: 'TOOL_CALLED', payload: called }).payload;
    expect(() => parseEventBody({ type: 'TOOL_COMPLETED', payload: parsed })).toThrow(ValidationError);
    expect(() => parseEventBody({ type: 'TOOL_CALLED', payload: { ...parsed, attempt: 0 } })).toThrow(
      /invalid TOOL_CALLED payload: attempt/,
    );
  });
});
