import { FakeOpenAiServer, startFakeOpenAiServer } from '@runledger/testing';
import { ChatMessage, ModelCallError, ModelRequest } from './model-backend';
import { ResponsesBackend } from './responses-backend';
import { toResponsesInput } from './responses-items';

/** The Responses backend against a local server speaking /v1/responses: stored conversations continued by id. */
describe('ResponsesBackend against a local /v1/responses server', () => {
  let server: FakeOpenAiServer;
  const started: FakeOpenAiServer[] = [];
  const start = async (options: Parameters<typeof startFakeOpenAiServer>[0] = {}) => {
    const s = await startFakeOpenAiServer(options);
    started.push(s);
    return s;
  };
  const backendOn = (s: FakeOpenAiServer, stream = true) =>
    new ResponsesBackend({ baseURL: s.baseURL, apiKey: 'k', models: { orchestrator: 'm' }, stream });
  beforeEach(async () => {
    server = await start();
  });
  afterEach(async () => {
    await Promise.all(started.splice(0).map((s) => s.close()));
  });

  const tools = [
    {
      name: 'file_read',
      description: 'Reads a file.',
      parameters: { type: 'object', properties: { path: { type: 'string' } } },
    },
  ];
  const call = (n: number) => ({ id: `call_${n}`, name: 'file_read', arguments: `{"path":"${n}.txt"}` });
  const system: ChatMessage = { role: 'system', content: 'You are a test.' };
  const user: ChatMessage = { role: 'user', content: 'read the files' };
  /** the conversation after `rounds` tool turns, as the runtime sends it */
  const conversation = (rounds: number): ChatMessage[] => [
    system,
    user,
    ...Array.from({ length: rounds }, (_, i): ChatMessage[] => [
      { role: 'assistant', content: '', tool_calls: [call(i + 1)] },
      { role: 'tool', tool_call_id: `call_${i + 1}`, content: `contents of ${i + 1}` },
    ]).flat(),
  ];
  const request = (over: Partial<ModelRequest>): ModelRequest => ({
    role: 'orchestrator',
    messages: conversation(0),
    timeout_ms: 5000,
    tools,
    ...over,
  });

  it('continues the stored response with only the new items; the server sees the whole conversation', async () => {
    const sut = backendOn(server);
    server.enqueue({ tool_calls: [call(1)] }, { tool_calls: [call(2)] }, { content: 'both read' });
    const r1 = await sut.complete(request({ messages: conversation(0), stream: true }));
    expect(r1.continuation).toMatchObject({
      response_id: expect.stringMatching(/^resp_/),
      previous_response_id: null,
      stateless_reason: 'missing',
      sent_items: 1,
      item_count: 2,
    });
    const r2 = await sut.complete(request({ messages: conversation(1), continuation: r1.continuation }));
    expect(r2.continuation).toMatchObject({
      previous_response_id: r1.continuation!.response_id,
      stateless_reason: null,
      sent_items: 1,
      item_count: 4,
    });
    const r3 = await sut.complete(request({ messages: conversation(2), continuation: r2.continuation }));
    expect(r3.content).toBe('both read');
    expect(r3.continuation).toMatchObject({
      previous_response_id: r2.continuation!.response_id,
      sent_items: 1,
    });

    const [q1, q2, q3] = server.requests;
    expect(q1.path).toBe('/v1/responses');
    expect(q1.body).toMatchObject({ instructions: 'You are a test.', store: true, stream: true });
    expect(q1.body.previous_response_id).toBeUndefined();
    expect(q2.body).toMatchObject({
      previous_response_id: r1.continuation!.response_id,
      instructions: 'You are a test.',
      input: [{ type: 'function_call_output', call_id: 'call_1', output: 'contents of 1' }],
    });
    // what the server answered for is what a full request would have sent
    expect(q3.conversation).toEqual(toResponsesInput(conversation(2)).items);
  });

  it('a conversation whose start changed goes out whole, recorded as stale', async () => {
    const sut = backendOn(server);
    server.enqueue({ tool_calls: [call(1)] }, { content: 'done' });
    const r1 = await sut.complete(request({}));
    const edited = conversation(1).map((m) =>
      m.role === 'user' ? { ...m, content: 'read other files' } : m,
    );
    const r2 = await sut.complete(request({ messages: edited, continuation: r1.continuation }));
    expect(r2.continuation).toMatchObject({
      previous_response_id: null,
      stateless_reason: 'stale',
      sent_items: 3,
    });
    expect(server.requests[1].body.previous_response_id).toBeUndefined();
    expect(server.requests[1].body.input).toEqual(toResponsesInput(edited).items);
  });

  it('a previous_response_id the server refuses is sent again whole, recorded as refused, answered once', async () => {
    const sut = backendOn(server, false);
    server.enqueue({ tool_calls: [call(1)] }, { content: 'answered after the refusal' });
    const r1 = await sut.complete(request({}));
    server.forgetResponses();
    const r2 = await sut.complete(request({ messages: conversation(1), continuation: r1.continuation }));
    expect(r2.content).toBe('answered after the refusal');
    expect(r2.continuation).toMatchObject({
      previous_response_id: null,
      stateless_reason: 'refused',
      sent_items: 3,
      detail: expect.stringContaining(`${r1.continuation!.response_id}`),
    });
    expect(r2.continuation!.detail).toMatch(/not found/);
    expect(server.requests.map((r) => r.body.previous_response_id ?? null)).toEqual([
      null,
      r1.continuation!.response_id,
      null,
    ]);
    expect(server.requests[2].body.input).toEqual(toResponsesInput(conversation(1)).items);
  });

  it('against a server that stores nothing every continuation is refused and the conversation still goes through', async () => {
    const stateless = await start({ storeResponses: false });
    const sut = backendOn(stateless);
    stateless.enqueue({ tool_calls: [call(1)] }, { tool_calls: [call(2)] });
    const r1 = await sut.complete(request({}));
    const r2 = await sut.complete(request({ messages: conversation(1), continuation: r1.continuation }));
    expect(r2.continuation?.stateless_reason).toBe('refused');
    expect(r2.tool_calls).toEqual([call(2)]);
  });

  it('a continuation the server refuses for another reason is a model error, not retried', async () => {
    const sut = backendOn(server);
    server.enqueue({ tool_calls: [call(1)] }, { status: 500, message: 'upstream down' });
    const r1 = await sut.complete(request({}));
    const err = await sut
      .complete(request({ messages: conversation(1), continuation: r1.continuation }))
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelCallError);
    expect(err).toMatchObject({ kind: 'provider_error', message: expect.stringContaining('upstream down') });
    expect(server.requests).toHaveLength(2);
  });

  it('an error event inside the stream is a ModelCallError of its kind', async () => {
    const sut = backendOn(server);
    server.enqueue({
      content: 'partial',
      stream_error: { message: 'slow down', code: 'rate_limit_exceeded' },
    });
    const chunks: string[] = [];
    const err = await sut
      .complete(request({ stream: true, onChunk: (d) => chunks.push(d) }))
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ kind: 'rate_limited', message: 'slow down' });
    expect(chunks.join('')).toBe('partial');
  });

  it("a reply's reasoning summary streams piece by piece before the text and is the recorded reasoning; a whole reply carries it too", async () => {
    server.enqueue(
      { reasoning: 'They ask for files; read them first.', content: 'reading' },
      { reasoning: 'Whole, not streamed.', content: 'done' },
    );
    const seen: string[] = [];
    const streamed = await backendOn(server).complete(
      request({
        stream: true,
        onReasoningChunk: (d) => void seen.push(`r:${d}`),
        onChunk: (d) => void seen.push(`t:${d}`),
      }),
    );
    expect(streamed.reasoning).toBe('They ask for files; read them first.');
    expect(seen.filter((s) => s.startsWith('r:')).length).toBeGreaterThan(1);
    expect(
      seen
        .filter((s) => s.startsWith('r:'))
        .map((s) => s.slice(2))
        .join(''),
    ).toBe(streamed.reasoning);
    expect(seen.findIndex((s) => s.startsWith('t:'))).toBeGreaterThan(
      seen.findLastIndex((s) => s.startsWith('r:')),
    );
    const whole = await backendOn(server, false).complete(request({}));
    expect(whole).toMatchObject({ content: 'done', reasoning: 'Whole, not streamed.' });
    server.enqueue({ content: 'plain' });
    expect((await backendOn(server).complete(request({ stream: true }))).reasoning).toBeUndefined();
  });

  it('streamed tool calls arrive whole, with the text streamed beside them and usage from the completed response', async () => {
    const sut = backendOn(server);
    server.enqueue({
      content: 'reading',
      tool_calls: [call(1), call(2)],
      usage: { prompt_tokens: 40, completion_tokens: 9 },
    });
    const chunks: string[] = [];
    const res = await sut.complete(request({ stream: true, onChunk: (d) => chunks.push(d) }));
    expect(res).toMatchObject({
      content: 'reading',
      tool_calls: [call(1), call(2)],
      finish_reason: 'tool_calls',
      usage: { prompt_tokens: 40, completion_tokens: 9, total_tokens: 49, estimated: false },
    });
    expect(chunks.join('')).toBe('reading');
    expect(server.requests[0].body.tools).toEqual([
      {
        type: 'function',
        name: 'file_read',
        description: 'Reads a file.',
        parameters: tools[0].parameters,
        strict: false,
      },
    ]);
  });
});
