import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RuntimeEvent } from '@runledger/contracts';
import { InMemoryEventStore } from '@runledger/event-store';
import { ModelCallError, OpenAiBackend, replayView } from '@runledger/runtime';
import {
  AllowAllPolicy,
  FakeOpenAiServer,
  TestRuntime,
  startTestRuntime,
  startFakeOpenAiServer,
  testToolRegistry,
} from '@runledger/testing';

describe('openai adapter against a local OpenAI-compatible server', () => {
  let server: FakeOpenAiServer;
  let dir: string;
  let store: InMemoryEventStore;
  let rt: TestRuntime;

  const backend = (models: { orchestrator?: string } = { orchestrator: 'orch-model' }) =>
    // These scenarios speak the JSON-directive protocol (the tools protocol has its own spec).
    new OpenAiBackend({ baseURL: server.baseURL, apiKey: 'test-key', models, protocol: 'json' });
  const run = async (input: string, modelTimeoutMs = 2000) => {
    rt = await startTestRuntime({
      store,
      tools: testToolRegistry(dir),
      permissions: new AllowAllPolicy(),
      model: backend(),
      modelTimeoutMs,
    });
    const { task_id } = await rt.runtime.submit({ input }, { source: 'cli' });
    const progress = await rt.runtime.settled(task_id);
    return { progress, events: await store.readWholeStream(task_id) };
  };
  const ofType = <T extends RuntimeEvent['type']>(events: RuntimeEvent[], t: T) =>
    events.filter((e): e is Extract<RuntimeEvent, { type: T }> => e.type === t);

  beforeEach(async () => {
    server = await startFakeOpenAiServer({ apiKey: 'test-key' });
    dir = mkdtempSync(join(tmpdir(), 'rl-openai-'));
    store = new InMemoryEventStore();
  });
  afterEach(async () => {
    await rt?.close();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('non-streaming: content, provider usage and model come back', async () => {
    const sut = backend();
    server.enqueue({ content: 'hello there', usage: { prompt_tokens: 7, completion_tokens: 3 } });
    const res = await sut.complete({
      role: 'orchestrator',
      messages: [{ role: 'user', content: 'hi' }],
      timeout_ms: 2000,
    });
    expect(res).toMatchObject({
      content: 'hello there',
      model: 'orch-model',
      finish_reason: 'stop',
      usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10, estimated: false },
    });
    expect(server.requests[0].body).toMatchObject({
      model: 'orch-model',
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(server.requests[0].body.stream).toBeUndefined();
  });

  it('a fenced tool directive runs, then a streamed respond becomes OUTPUT_CHUNK events and the answer', async () => {
    server.enqueue(
      { content: 'Sure:\n```json\n{"type":"tool","tool":"echo","args":{"text":"ping"}}\n```' },
      {
        content: '{"type":"respond","content":"the echo said \\"ping\\"\\nbye"}',
        usage: { prompt_tokens: 50, completion_tokens: 12 },
      },
    );
    const { progress, events } = await run('echo ping please');
    expect(progress.final).toMatchObject({ stop_reason: 'completed', result: 'the echo said "ping"\nbye' });
    expect(ofType(events, 'TOOL_COMPLETED')[0].payload.result.output).toBe('ping');
    const chunks = ofType(events, 'OUTPUT_CHUNK');
    expect(chunks.length).toBeGreaterThan(1);
    expect(chunks.map((c) => c.payload.delta).join('')).toBe('the echo said "ping"\nbye');
    expect(server.requests.every((r) => r.body.stream === true)).toBe(true);
    const responded = ofType(events, 'MODEL_RESPONDED');
    expect(responded[1].payload.usage).toMatchObject({
      prompt_tokens: 50,
      completion_tokens: 12,
      estimated: false,
    });
    expect(progress.usage).toMatchObject({ rounds: 2, tool_calls: 1, model_calls: 2 });
  });

  it('json protocol: the directive schema goes as response_format; a server refusing it is asked again without, from then on', async () => {
    server.enqueue(
      { status: 400, message: "response_format of type 'json_schema' is not supported by this model" },
      { content: '{"type":"tool","tool":"echo","args":{"text":"ping"}}' },
      { content: '{"type":"respond","content":"pong"}' },
    );
    const { progress } = await run('echo ping');
    expect(progress.final).toMatchObject({ stop_reason: 'completed', result: 'pong' });
    const formats = server.requests.map((r) => r.body.response_format as { type: string } | undefined);
    expect(formats[0]).toMatchObject({
      type: 'json_schema',
      json_schema: { name: 'execution_directive', schema: { oneOf: expect.any(Array) } },
    });
    expect(formats.slice(1)).toEqual([undefined, undefined]);
    expect(server.requests.every((r) => r.body.tools === undefined)).toBe(true);
  });

  it('429 with Retry-After: rate_limited is recorded and the task falls back to sys_util', async () => {
    server.enqueue({ status: 429, retry_after: '2' }, { content: '{"type":"respond","content":"done"}' });
    const { progress, events } = await run('run echo via fallback');
    const first = ofType(events, 'MODEL_RESPONDED')[0].payload;
    expect(first).toMatchObject({ error: { kind: 'rate_limited' }, retry_after_ms: 2000, content: null });
    expect(ofType(events, 'ROUTER_DECIDED')[0].payload).toMatchObject({
      source: 'sys_util',
      fallback_reason: expect.stringContaining('rate_limited'),
    });
    expect(progress.final).toMatchObject({ stop_reason: 'completed', result: 'done' });
  });

  it('a tools-protocol model that fell back to sys_util after a 429 replays event for event, its requests still native', async () => {
    // a Retry-After longer than the runtime waits: the fallback answers round 1, the model round 2
    server.enqueue({ status: 429, retry_after: '600' }, { content: 'echoed it' });
    rt = await startTestRuntime({
      store,
      tools: testToolRegistry(dir),
      permissions: new AllowAllPolicy(),
      model: new OpenAiBackend({
        baseURL: server.baseURL,
        apiKey: 'test-key',
        models: { orchestrator: 'orch-model' },
        protocol: 'tools',
      }),
      modelTimeoutMs: 2000,
    });
    const { task_id } = await rt.runtime.submit({ input: 'run echo via fallback' }, { source: 'cli' });
    expect((await rt.runtime.settled(task_id)).final).toMatchObject({
      stop_reason: 'completed',
      result: 'echoed it',
    });
    const events = await store.readWholeStream(task_id);
    expect(ofType(events, 'ROUTER_DECIDED').map((e) => e.payload.source)).toEqual([
      'sys_util',
      'orchestrator',
    ]);
    expect(server.requests.every((r) => Array.isArray(r.body.tools))).toBe(true);
    const replay = await rt.runtime.replay(task_id);
    expect(replayView(replay.events)).toEqual(replayView(events));
  });

  it('429 on input sys_util cannot handle stops with rate_limited', async () => {
    server.enqueue({ status: 429, retry_after: '1' });
    const { progress } = await run('write me a poem');
    expect(progress.final?.stop_reason).toBe('rate_limited');
  });

  it('500 is a provider_error', async () => {
    server.enqueue({ status: 500 });
    const { progress, events } = await run('write me a poem');
    expect(ofType(events, 'MODEL_RESPONDED')[0].payload.error?.kind).toBe('provider_error');
    expect(progress.final?.stop_reason).toBe('provider_error');
  });

  it('401 is an authentication_error', async () => {
    server.enqueue({ status: 401 });
    const { progress } = await run('write me a poem');
    expect(progress.final?.stop_reason).toBe('authentication_error');
  });

  it('a slow response hits the timeout', async () => {
    server.enqueue({ delay_ms: 1500, content: '{"type":"respond","content":"late"}' });
    const started = Date.now();
    const { progress, events } = await run('write me a poem', 300);
    expect(progress.final?.stop_reason).toBe('timeout');
    expect(ofType(events, 'MODEL_RESPONDED')[0].payload.error?.kind).toBe('timeout');
    expect(Date.now() - started).toBeLessThan(1500);
  });

  it('a stream that stalls after its first chunk times out', async () => {
    server.enqueue({ content: '{"type":"respond","content":"never finished"}', stall_ms: 1500 });
    const { progress } = await run('write me a poem', 300);
    expect(progress.final?.stop_reason).toBe('timeout');
  });

  it('a role with no model is refused before any request', async () => {
    const sut = new OpenAiBackend({ baseURL: server.baseURL, apiKey: 'test-key', models: {} });
    await expect(sut.complete({ role: 'coder', messages: [], timeout_ms: 100 })).rejects.toBeInstanceOf(
      ModelCallError,
    );
    expect(server.requests).toHaveLength(0);
  });
});
