import { ModelToolCall } from '@runledger/contracts';
import { ChatMessage } from './model-backend';
import {
  ToolCallAssembler,
  ToolCallDelta,
  checkToolTurns,
  distinctCallIds,
  withJsonArguments,
} from './tool-turns';

const call = (id: string, name = 'read_file'): ModelToolCall => ({ id, name, arguments: '{}' });
const sys: ChatMessage = { role: 'system', content: 's' };
const user: ChatMessage = { role: 'user', content: 'u' };
const asks = (...ids: string[]): ChatMessage => ({
  role: 'assistant',
  content: '',
  tool_calls: ids.map((i) => call(i)),
});
const answers = (id: string): ChatMessage => ({ role: 'tool', tool_call_id: id, content: 'r' });

describe('checkToolTurns', () => {
  it.each<[string, ChatMessage[], number]>([
    ['no tool turn at all', [sys, user], 0],
    ['one call answered', [sys, user, asks('a'), answers('a')], 1],
    ['two calls answered in order', [sys, user, asks('a', 'b'), answers('a'), answers('b')], 1],
    [
      'two turns, then a user message',
      [sys, user, asks('a'), answers('a'), asks('b', 'c'), answers('b'), answers('c'), user],
      2,
    ],
    ['a plain assistant message is no turn', [sys, user, { role: 'assistant', content: 'x' }, user], 0],
  ])('accepts %s', (_name, messages, turns) => {
    expect(checkToolTurns(messages)).toEqual({ ok: true, turns });
  });

  it.each<[string, ChatMessage[], RegExp]>([
    ['a call without its answer', [sys, user, asks('a')], /tool call a has no tool message/],
    [
      'a second call without its answer',
      [sys, user, asks('a', 'b'), answers('a')],
      /tool call b has no tool message/,
    ],
    [
      'answers out of order',
      [sys, user, asks('a', 'b'), answers('b'), answers('a')],
      /answers b, expected a/,
    ],
    ['an answer to another id', [sys, user, asks('a'), answers('z')], /answers z, expected a/],
    [
      'a user message between call and answer',
      [sys, user, asks('a'), user, answers('a')],
      /tool call a has no tool message/,
    ],
    ['a tool message with no call before it', [sys, user, answers('a')], /answers no preceding tool call/],
    [
      'one answer too many',
      [sys, user, asks('a'), answers('a'), answers('a')],
      /answers no preceding tool call/,
    ],
    [
      'an empty tool_calls list',
      [sys, user, { role: 'assistant', content: '', tool_calls: [] }],
      /tool_calls is empty/,
    ],
    ['a duplicate call id', [sys, user, asks('a', 'a'), answers('a'), answers('a')], /id a is used twice/],
    ['an empty call id', [sys, user, asks(' '), answers(' ')], /empty id/],
  ])('refuses %s', (_name, messages, error) => {
    const out = checkToolTurns(messages);
    expect(out.ok).toBe(false);
    if (!out.ok) {
      expect(out.error).toMatch(error);
      expect(out.malformed).toBeGreaterThan(0);
    }
  });
});

describe('ToolCallAssembler', () => {
  const assemble = (...chunks: ToolCallDelta[][]) => {
    const sut = new ToolCallAssembler();
    for (const c of chunks) sut.feed(c);
    return sut.result();
  };

  it.each<[string, ToolCallDelta[][], ModelToolCall[]]>([
    ['nothing streamed', [], []],
    [
      'one call: id and name first, arguments in fragments',
      [
        [{ index: 0, id: 'call_1', function: { name: 'read_file', arguments: '' } }],
        [{ index: 0, function: { arguments: '{"pa' } }],
        [{ index: 0, function: { arguments: 'th":"a.txt"}' } }],
      ],
      [{ id: 'call_1', name: 'read_file', arguments: '{"path":"a.txt"}' }],
    ],
    [
      'two parallel calls, fragments interleaved',
      [
        [{ index: 0, id: 'c0', function: { name: 'read_file' } }],
        [{ index: 1, id: 'c1', function: { name: 'run_command' } }],
        [
          { index: 1, function: { arguments: '{"command":' } },
          { index: 0, function: { arguments: '{"path":' } },
        ],
        [{ index: 0, function: { arguments: '"x"}' } }],
        [{ index: 1, function: { arguments: '"ls"}' } }],
      ],
      [
        { id: 'c0', name: 'read_file', arguments: '{"path":"x"}' },
        { id: 'c1', name: 'run_command', arguments: '{"command":"ls"}' },
      ],
    ],
    [
      'calls come out in index order, whatever order they started in',
      [
        [{ index: 1, id: 'b', function: { name: 'y', arguments: '{}' } }],
        [{ index: 0, id: 'a', function: { name: 'x', arguments: '{}' } }],
      ],
      [
        { id: 'a', name: 'x', arguments: '{}' },
        { id: 'b', name: 'y', arguments: '{}' },
      ],
    ],
    [
      'a server repeating the whole name in every piece',
      [
        [{ index: 0, id: 'c', function: { name: 'read_file', arguments: '{' } }],
        [{ index: 0, id: 'c', function: { name: 'read_file', arguments: '}' } }],
      ],
      [{ id: 'c', name: 'read_file', arguments: '{}' }],
    ],
    [
      'a name sent in fragments',
      [
        [{ index: 0, id: 'c', function: { name: 'read_' } }],
        [{ index: 0, function: { name: 'file', arguments: '{}' } }],
      ],
      [{ id: 'c', name: 'read_file', arguments: '{}' }],
    ],
    [
      'a call streamed without an id gets one from its index',
      [[{ index: 2, function: { name: 'x', arguments: '{}' } }]],
      [{ id: 'call_2', name: 'x', arguments: '{}' }],
    ],
  ])('%s', (_name, chunks, expected) => {
    expect(assemble(...chunks)).toEqual(expected);
  });
});

describe('distinctCallIds', () => {
  it('keeps distinct ids, renames a repeated one after its position, and never onto an id the reply already has', () => {
    expect(distinctCallIds([call('a'), call('b')])).toEqual([call('a'), call('b')]);
    expect(distinctCallIds([call('a'), call('a'), call('a_2'), call('a')]).map((c) => c.id)).toEqual([
      'a',
      'a_2_2',
      'a_2',
      'a_4',
    ]);
  });
});

describe('withJsonArguments', () => {
  it('sends a call whose arguments are not JSON back with them as a JSON string; JSON arguments stay as they are', () => {
    const bad: ModelToolCall = { id: 'b', name: 'echo', arguments: '{"text": "hi"' };
    const good: ModelToolCall = { id: 'g', name: 'echo', arguments: '{"text":"ok"}' };
    const messages: ChatMessage[] = [
      sys,
      user,
      { role: 'assistant', content: '', tool_calls: [good, bad] },
      answers('g'),
      answers('b'),
    ];
    const sent = withJsonArguments(messages);
    expect(sent[2]).toEqual({
      role: 'assistant',
      content: '',
      tool_calls: [
        good,
        { id: 'b', name: 'echo', arguments: '{"unparsed_arguments":"{\\"text\\": \\"hi\\""}' },
      ],
    });
    expect(JSON.parse((sent[2] as { tool_calls: ModelToolCall[] }).tool_calls[1].arguments)).toEqual({
      unparsed_arguments: '{"text": "hi"',
    });
    expect(sent.filter((m, i) => m !== messages[i])).toHaveLength(1);
    const clean = asks('a');
    expect(withJsonArguments([clean])[0]).toBe(clean);
  });
});
