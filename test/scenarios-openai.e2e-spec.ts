import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventPayload, RuntimeEvent } from '@runledger/contracts';
import { InMemoryEventStore } from '@runledger/event-store';
import {
  DEFAULT_DISCIPLINE_SETTINGS,
  DisciplineSettings,
  OpenAiBackend,
  Runtime,
  createRuntime,
  seededRandom,
} from '@runledger/runtime';
import {
  AllowAllPolicy,
  FakeOpenAiServer,
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
  streamIdleTimeoutMs: 150,
};

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
  let rt: Runtime;

  const run = async (input: string, modelTimeoutMs = 2000) => {
    rt = createRuntime({
      store,
      tools: testToolRegistry(dir),
      permissions: new AllowAllPolicy(),
      model: new OpenAiBackend({
        baseURL: server.baseURL,
        apiKey: 'test-key',
        models: { orchestrator: 'orch-model' },
      }),
      modelTimeoutMs,
      discipline: settings,
      rng: seededRandom(7),
      log: () => undefined,
    });
    const { task_id } = await rt.service.submit({ input }, { source: 'cli' });
    const progress = await rt.service.settled(task_id);
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
    await rt?.service.close();
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
    const r = await run('write me a poem', 2000);
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
