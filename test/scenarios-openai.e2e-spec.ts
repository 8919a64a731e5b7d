import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventPayload, RuntimeEvent } from '@runledger/contracts';
import { InMemoryEventStore } from '@runledger/event-store';
import {
  DEFAULT_DISCIPLINE_SETTINGS,
  DisciplineSettings,
  OpenAiBackend,
  seededRandom,
} from '@runledger/runtime';
import {
  AllowAllPolicy,
  FakeOpenAiServer,
  TestRuntime,
  startTestRuntime,
  startFakeOpenAiServer,
  testToolRegistry,
} from '@runledger/testing';

/**
 * The failure taxonomy against a real local OpenAI-compatible HTTP server:
 * each failure ends as the taxonomy says, and every retry is in the log.
 */
const settings: DisciplineSettings = {
  ...DEFAULT_DISCIPLINE_SETTINGS,
  retry: { modelRetries: 2, toolRetries: 1, baseDelayMs: 10, maxDelayMs: 50, maxRetryAfterMs: 5000 },
};
/**
 * For the stall tests only: any other test would see a pause of the jest process longer than this
 * between two streamed chunks (it runs the server too) as a stalled stream, and retry once more.
 */
const stalling: DisciplineSettings = { ...settings, streamIdleTimeoutMs: 150 };

const of = <T extends RuntimeEvent['type']>(events: RuntimeEvent[], t: T) =>
  events.filter((e): e is Extract<RuntimeEvent, { type: T }> => e.type === t);
const retries = (events: RuntimeEvent[]) =>
  of(events, 'GUARD_TRIGGERED')
    .filter((e) => e.payload.guard === 'retry')
    .map((e) => e.payload);
const attempts = (events: RuntimeEvent[]) =>
  of(events, 'MODEL_CALLED')
    .filter((e) => e.payload.backend === 'openai')
    .map((e) => e.payload.attempt);

describe('failure taxonomy against the local OpenAI-compatible server', () => {
  let server: FakeOpenAiServer;
  let dir: string;
  let store: InMemoryEventStore;
  let rt: TestRuntime;

  // the stall test passes its own timeout; the others never wait for one, and a full suite on 2 cores once
  // took over 2 s to answer the first request of a file
  const run = async (input: string, modelTimeoutMs = 10_000, discipline = settings) => {
    rt = await startTestRuntime({
      store,
      tools: testToolRegistry(dir),
      permissions: new AllowAllPolicy(),
      model: new OpenAiBackend({
        baseURL: server.baseURL,
        apiKey: 'test-key',
        models: { orchestrator: 'orch-model' },
        protocol: 'json',
      }),
      modelTimeoutMs,
      discipline,
      rng: seededRandom(7),
    });
    const { task_id } = await rt.runtime.submit({ input }, { source: 'cli' });
    const progress = await rt.runtime.settled(task_id);
    const events = await store.readWholeStream(task_id);
    const final = events[events.length - 1].payload as EventPayload<'TASK_FAILED'>;
    return { progress, events, stop: final.stop_reason, usage: final.usage };
  };

  beforeEach(async () => {
    server = await startFakeOpenAiServer({ apiKey: 'test-key' });
    dir = mkdtempSync(join(tmpdir(), 'rl-taxonomy-'));
    store = new InMemoryEventStore();
  });
  afterEach(async () => {
    await rt?.close();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('429 with Retry-After: waits what the server asked, retries, and the answer completes the task', async () => {
    server.enqueue(
      { status: 429, retry_after: '0.3' },
      {
        content: '{"type":"respond","content":"after the wait"}',
        usage: { prompt_tokens: 20, completion_tokens: 5 },
      },
    );
    const started = Date.now();
    const r = await run('write me a poem');
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    expect(r.stop).toBe('completed');
    expect(retries(r.events)).toEqual([
      expect.objectContaining({ data: expect.objectContaining({ kind: 'rate_limited', delay_ms: 300 }) }),
    ]);
    expect(attempts(r.events)).toEqual([1, 2]);
    expect(of(r.events, 'MODEL_RESPONDED')[0].payload).toMatchObject({
      error: { kind: 'rate_limited' },
      retry_after_ms: 300,
    });
    expect(r.usage).toMatchObject({
      rounds: 1,
      model_calls: 2,
      failures: 1,
      prompt_tokens: 20,
      completion_tokens: 5,
    });
  });

  it('429 on every attempt: retries run out, the fallback cannot help, rate_limited', async () => {
    server.enqueue(
      { status: 429, retry_after: '0.05' },
      { status: 429, retry_after: '0.05' },
      { status: 429, retry_after: '0.05' },
    );
    const r = await run('write me a poem');
    expect(r.stop).toBe('rate_limited');
    expect(retries(r.events)).toHaveLength(2);
    expect(attempts(r.events)).toEqual([1, 2, 3]);
    expect(server.requests).toHaveLength(3);
  });

  it('500 then success: one retry after backoff, completed', async () => {
    server.enqueue({ status: 500 }, { content: '{"type":"respond","content":"recovered"}' });
    const r = await run('write me a poem');
    expect(r.stop).toBe('completed');
    expect(r.progress.final?.result).toBe('recovered');
    expect(retries(r.events)).toEqual([
      expect.objectContaining({ data: expect.objectContaining({ kind: 'provider_error' }) }),
    ]);
    expect(attempts(r.events)).toEqual([1, 2]);
  });

  it('a stream that stalls on every attempt: the inactivity timeout ends each attempt, retried, then timeout', async () => {
    server.setDefault({ content: '{"type":"respond","content":"never finished"}', stall_ms: 3000 });
    const r = await run('write me a poem', 2000, stalling);
    expect(r.stop).toBe('timeout');
    expect(retries(r.events).map((p) => p.data.kind)).toEqual(['timeout', 'timeout']);
    expect(attempts(r.events)).toEqual([1, 2, 3]);
    const failed = of(r.events, 'MODEL_RESPONDED').filter((e) => e.payload.error?.kind === 'timeout');
    expect(failed).toHaveLength(3);
    expect(failed[0].payload.error?.message).toBe('model call sent nothing for 150 ms');
    expect(failed[0].payload.latency_ms).toBeLessThan(1500);
  });

  it('401: authentication_error at once, one request, no retry and no fallback', async () => {
    server.enqueue({ status: 401 });
    const r = await run('run echo would-be-fallback');
    expect(r.stop).toBe('authentication_error');
    expect(server.requests).toHaveLength(1);
    expect(retries(r.events)).toEqual([]);
    expect(of(r.events, 'GUARD_TRIGGERED').map((e) => e.payload.guard)).toEqual([]);
    expect(of(r.events, 'ROUTER_DECIDED')).toHaveLength(0);
  });
});

/**
 * The orchestrator's fallback chain against two real local servers: the
 * primary fails, the secondary (which wants its own key) answers.
 */
describe('fallback providers against two local OpenAI-compatible servers', () => {
  let primary: FakeOpenAiServer;
  let secondary: FakeOpenAiServer;
  let dir: string;
  let store: InMemoryEventStore;
  let rt: TestRuntime;

  const run = async (input: string, modelTimeoutMs = 10_000, discipline = settings) => {
    rt = await startTestRuntime({
      store,
      tools: testToolRegistry(dir),
      permissions: new AllowAllPolicy(),
      model: new OpenAiBackend({
        baseURL: primary.baseURL,
        apiKey: 'key-a',
        models: { orchestrator: 'model-a' },
        protocol: 'json',
      }),
      fallbackModels: [
        new OpenAiBackend({
          baseURL: secondary.baseURL,
          apiKey: 'key-b',
          models: { orchestrator: 'model-b' },
          protocol: 'json',
          label: 'secondary',
        }),
      ],
      modelTimeoutMs,
      discipline,
      rng: seededRandom(7),
    });
    const { task_id } = await rt.runtime.submit({ input }, { source: 'cli' });
    const progress = await rt.runtime.settled(task_id);
    return { progress, events: await store.readWholeStream(task_id) };
  };
  const primaryLabel = () => `model-a@${new URL(primary.baseURL).host}`;
  /** model calls, failures and guards, one line each, in log order */
  const trail = (events: RuntimeEvent[]): string[] =>
    events.flatMap((e) =>
      e.type === 'MODEL_CALLED'
        ? [`called ${e.payload.model} #${e.payload.attempt}`]
        : e.type === 'MODEL_RESPONDED'
          ? [e.payload.error ? `${e.payload.error.kind}` : `answered by ${e.payload.model}`]
          : e.type === 'GUARD_TRIGGERED'
            ? [`${e.payload.guard} ${String(e.payload.data.to ?? e.payload.data.provider)}`]
            : e.type === 'ROUTER_DECIDED' || e.type === 'TASK_COMPLETED' || e.type === 'TASK_FAILED'
              ? [e.type]
              : [],
    );

  beforeEach(async () => {
    primary = await startFakeOpenAiServer({ apiKey: 'key-a' });
    secondary = await startFakeOpenAiServer({ apiKey: 'key-b' });
    dir = mkdtempSync(join(tmpdir(), 'rl-fallback-'));
    store = new InMemoryEventStore();
  });
  afterEach(async () => {
    await rt?.close();
    await primary.close();
    await secondary.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('500 on every attempt of the primary: retried, then the secondary answers and completes the task', async () => {
    primary.setDefault({ status: 500 });
    secondary.enqueue({ content: '{"type":"respond","content":"from the secondary"}' });
    const { progress, events } = await run('write me a poem');
    expect(progress.final).toMatchObject({ stop_reason: 'completed', result: 'from the secondary' });
    const a = primaryLabel();
    expect(trail(events)).toEqual([
      'called model-a #1',
      'provider_error',
      `retry ${a}`,
      'called model-a #2',
      'provider_error',
      `retry ${a}`,
      'called model-a #3',
      'provider_error',
      'fallback secondary',
      'called model-b #1',
      'answered by model-b',
      'ROUTER_DECIDED',
      'TASK_COMPLETED',
    ]);
    const switched = of(events, 'GUARD_TRIGGERED').find((e) => e.payload.guard === 'fallback')!.payload;
    expect(switched.data).toEqual({
      role: 'orchestrator',
      kind: 'provider_error',
      from: a,
      to: 'secondary',
      attempts: 3,
    });
    expect(of(events, 'ROUTER_DECIDED')[0].payload).toMatchObject({
      source: 'orchestrator',
      fallback_reason: expect.stringContaining('falling back to secondary'),
    });
    expect(primary.requests).toHaveLength(3);
    expect(secondary.requests).toHaveLength(1);
    expect(secondary.requests[0].body.model).toBe('model-b');
    expect(secondary.requests[0].headers.authorization).toBe('Bearer key-b');
    // Neither key is in the log.
    expect(JSON.stringify(events)).not.toMatch(/key-a|key-b/);
  });

  it('429 with a Retry-After longer than we wait: no retry on the primary, straight to the secondary', async () => {
    primary.enqueue({ status: 429, retry_after: '600' });
    secondary.enqueue({ content: '{"type":"respond","content":"no waiting"}' });
    const { progress, events } = await run('write me a poem');
    expect(progress.final).toMatchObject({ stop_reason: 'completed', result: 'no waiting' });
    expect(trail(events).slice(0, 4)).toEqual([
      'called model-a #1',
      'rate_limited',
      'fallback secondary',
      'called model-b #1',
    ]);
    expect(primary.requests).toHaveLength(1);
  });

  it('a primary whose stream stalls: each attempt times out, then the secondary answers', async () => {
    primary.setDefault({ content: '{"type":"respond","content":"never finished"}', stall_ms: 3000 });
    secondary.enqueue({ content: '{"type":"respond","content":"streamed fine"}' });
    const { progress, events } = await run('write me a poem', 10_000, stalling);
    expect(progress.final).toMatchObject({ stop_reason: 'completed', result: 'streamed fine' });
    expect(retries(events).map((p) => p.data.kind)).toEqual(['timeout', 'timeout']);
    expect(
      of(events, 'OUTPUT_CHUNK')
        .map((e) => e.payload.delta)
        .join(''),
    ).toBe('streamed fine');
  });

  it('the task stays on the secondary: the next round does not ask the primary again', async () => {
    primary.setDefault({ status: 500 });
    secondary.enqueue(
      { content: '{"type":"tool","tool":"echo","args":{"text":"hi"}}' },
      { content: '{"type":"respond","content":"echoed"}' },
    );
    const { progress } = await run('echo something');
    expect(progress.final).toMatchObject({ stop_reason: 'completed', result: 'echoed' });
    expect(progress.usage).toMatchObject({ rounds: 2, tool_calls: 1 });
    expect(primary.requests).toHaveLength(3);
    expect(secondary.requests).toHaveLength(2);
  });

  it('401 on the primary: authentication_error at once, the secondary is never asked', async () => {
    primary.enqueue({ status: 401 });
    const { progress, events } = await run('run echo would-be-fallback');
    expect(progress.final?.stop_reason).toBe('authentication_error');
    expect(primary.requests).toHaveLength(1);
    expect(secondary.requests).toHaveLength(0);
    expect(of(events, 'GUARD_TRIGGERED')).toEqual([]);
  });

  it('both providers failing: the sys_util fallback runs what it understands, from the secondary', async () => {
    primary.setDefault({ status: 500 });
    secondary.setDefault({ status: 503 });
    const { progress, events } = await run('run echo still-served');
    expect(progress.final).toMatchObject({ stop_reason: 'completed' });
    const switches = of(events, 'GUARD_TRIGGERED')
      .filter((e) => e.payload.guard === 'fallback')
      .map((e) => [e.payload.round, e.payload.data.from, e.payload.data.to]);
    expect(switches[0]).toEqual([1, primaryLabel(), 'secondary']);
    expect(switches[1]).toEqual([1, 'secondary', 'sys_util']);
    expect(of(events, 'ROUTER_DECIDED')[0].payload).toMatchObject({ source: 'sys_util' });
    expect(of(events, 'TOOL_COMPLETED')[0].payload.result.output).toEqual(
      expect.objectContaining({ stdout: expect.stringContaining('still-served') }),
    );
  });

  it('both providers failing on input sys_util cannot read: the last failure is the stop reason', async () => {
    primary.setDefault({ status: 500 });
    secondary.setDefault({ status: 429, retry_after: '0.01' });
    const { progress } = await run('write me a poem');
    expect(progress.final?.stop_reason).toBe('rate_limited');
    expect(primary.requests).toHaveLength(3);
    expect(secondary.requests).toHaveLength(3);
  });
});
