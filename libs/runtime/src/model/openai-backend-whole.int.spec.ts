import { FakeOpenAiServer, startFakeOpenAiServer } from '@runledger/testing';
import { OpenAiBackend } from './openai-backend';

/** Replies that arrive whole (RUNLEDGER_MODEL_STREAM=off), from a local OpenAI-compatible server. */
describe('OpenAiBackend with streaming off', () => {
  let server: FakeOpenAiServer;
  let sut: OpenAiBackend;
  beforeEach(async () => {
    server = await startFakeOpenAiServer();
    sut = new OpenAiBackend({
      baseURL: server.baseURL,
      apiKey: 'k',
      models: { orchestrator: 'm' },
      stream: false,
    });
  });
  afterEach(() => server.close());

  const tools = [{ name: 'echo', description: 'echo', parameters: { type: 'object', properties: {} } }];

  it('a whole answer slower than the stream-idle timeout is an answer: nothing streams, so only the call timeout counts', async () => {
    server.enqueue({ content: 'slow but whole', delay_ms: 600 });
    const res = await sut.complete({
      role: 'orchestrator',
      messages: [{ role: 'user', content: 'hi' }],
      timeout_ms: 5000,
      idle_timeout_ms: 200,
      stream: true,
      onChunk: () => undefined,
    });
    expect(res.content).toBe('slow but whole');
    expect(server.requests[0].body.stream).toBeFalsy();
  });

  it('a tool call the server sent without an id gets one, as on the streamed path', async () => {
    server.enqueue({
      tool_calls: [
        { name: 'echo', arguments: '{}' },
        { name: 'echo', arguments: '{"a":1}' },
      ],
    });
    const res = await sut.complete({
      role: 'orchestrator',
      messages: [{ role: 'user', content: 'hi' }],
      timeout_ms: 5000,
      tools,
    });
    expect(res.tool_calls).toEqual([
      { id: 'call_0', name: 'echo', arguments: '{}' },
      { id: 'call_1', name: 'echo', arguments: '{"a":1}' },
    ]);
  });
});
