import { ChatMessage } from './model-backend';
import { continuationRecord, planContinuation, toResponsesInput } from './responses-items';

const call = { id: 'call_1', name: 'file_read', arguments: '{"path":"a.txt"}' };
const first: ChatMessage[] = [
  { role: 'system', content: 'You are a test.' },
  { role: 'user', content: 'read a.txt' },
];
const second: ChatMessage[] = [
  ...first,
  { role: 'assistant', content: '', tool_calls: [call] },
  { role: 'tool', tool_call_id: 'call_1', content: 'hello' },
];

/** the record the first call leaves when its reply was `call` */
const anchorAfterFirst = (response_id: string | null) => {
  const { items } = toResponsesInput(first);
  const plan = planContinuation(items, null);
  return continuationRecord(items, plan, { response_id, content: '', tool_calls: [call] });
};

describe('Responses API items and continuation', () => {
  it('leading system messages become instructions; tool turns become function_call items and their outputs', () => {
    expect(toResponsesInput(second)).toEqual({
      instructions: 'You are a test.',
      items: [
        { type: 'message', role: 'user', content: 'read a.txt' },
        { type: 'function_call', call_id: 'call_1', name: 'file_read', arguments: '{"path":"a.txt"}' },
        { type: 'function_call_output', call_id: 'call_1', output: 'hello' },
      ],
    });
  });

  it('the first call of a conversation has nothing to continue: missing', () => {
    const { items } = toResponsesInput(first);
    expect(planContinuation(items, null)).toMatchObject({
      previous_response_id: null,
      stateless_reason: 'missing',
      send: items,
    });
  });

  it('a conversation that extends the items the anchor saw sends only the new ones, with its id', () => {
    const anchor = anchorAfterFirst('resp_1');
    expect(anchor).toMatchObject({ item_count: 2, response_id: 'resp_1', stateless_reason: 'missing' });
    const { items } = toResponsesInput(second);
    expect(planContinuation(items, anchor)).toEqual({
      previous_response_id: 'resp_1',
      stateless_reason: null,
      detail: null,
      send: [{ type: 'function_call_output', call_id: 'call_1', output: 'hello' }],
    });
  });

  it('a changed system prompt does not break the continuation: instructions go with every request', () => {
    const anchor = anchorAfterFirst('resp_1');
    const { items, instructions } = toResponsesInput([
      { role: 'system', content: 'Round 2.' },
      ...second.slice(1),
    ]);
    expect(instructions).toBe('Round 2.');
    expect(planContinuation(items, anchor).previous_response_id).toBe('resp_1');
  });

  it('an anchor without an id (the server stored nothing) is missing', () => {
    const { items } = toResponsesInput(second);
    expect(planContinuation(items, anchorAfterFirst(null))).toMatchObject({
      previous_response_id: null,
      stateless_reason: 'missing',
      send: items,
    });
  });

  it('a conversation whose earlier items changed (the task input, a compacted history) is stale', () => {
    const changed = second.map((m) => (m.role === 'user' ? { ...m, content: 'read b.txt' } : m));
    const { items } = toResponsesInput(changed);
    const plan = planContinuation(items, anchorAfterFirst('resp_1'));
    expect(plan).toMatchObject({ previous_response_id: null, stateless_reason: 'stale', send: items });
    expect(plan.detail).toMatch(/first 2 items differ.*resp_1/);
  });

  it('a reply the runtime sends back otherwise than the server stored it (text beside the call) is stale', () => {
    const { items: firstItems } = toResponsesInput(first);
    const anchor = continuationRecord(firstItems, planContinuation(firstItems, null), {
      response_id: 'resp_1',
      content: 'let me look',
      tool_calls: [call],
    });
    const { items } = toResponsesInput(second);
    expect(planContinuation(items, anchor).stateless_reason).toBe('stale');
  });

  it('nothing after the anchor is stale too: an empty continuation would ask the same again', () => {
    const { items } = toResponsesInput(first);
    const anchor = continuationRecord(items, planContinuation(items, null), {
      response_id: 'resp_1',
      content: '',
      tool_calls: [],
    });
    expect(planContinuation(items, anchor)).toMatchObject({ stateless_reason: 'stale', send: items });
  });
});
