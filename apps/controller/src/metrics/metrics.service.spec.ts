import { Subject } from 'rxjs';
import { parseEventBody, RuntimeEvent, TaskStatus } from '@runledger/contracts';
import { EventBus } from '@runledger/event-store';
import { TaskViews } from '@runledger/runtime';
import { MetricsService } from './metrics.service';

let position = 0;
/** a committed event of a valid body (defaults applied as the store applies them) */
function committed(type: string, payload: unknown): RuntimeEvent {
  position++;
  return {
    ...parseEventBody({ type, payload }),
    event_id: `evt_${position}`,
    task_id: 'task_1',
    session_id: 'sess_1',
    sequence: position,
    position,
    causation_id: null,
    correlation_id: 'corr_1',
    created_at: new Date(0).toISOString(),
  } as RuntimeEvent;
}

const usage = (prompt: number, completion: number) => ({
  prompt_tokens: prompt,
  completion_tokens: completion,
  total_tokens: prompt + completion,
});

function newBackend(byStatus: Partial<Record<TaskStatus, number>> = {}) {
  const committed$ = new Subject<RuntimeEvent>();
  const bus = { events$: committed$ } as unknown as EventBus;
  const tasks = { countByStatus: async () => byStatus } as unknown as TaskViews;
  return { backend: { bus, tasks }, committed$ };
}

const newMetrics = () => {
  const { backend } = newBackend();
  return new MetricsService(backend.bus, backend.tasks);
};

async function value(sut: MetricsService, name: string, labels: Record<string, string> = {}) {
  const metric = await sut.registry.getSingleMetric(name)?.get();
  const found = metric?.values.find((v) =>
    Object.entries(labels).every(([k, l]) => String((v.labels as Record<string, unknown>)[k]) === l),
  );
  return found?.value;
}

describe('MetricsService', () => {
  it('counts committed events, model calls and tokens by role, tool outcomes by tool', async () => {
    const { backend, committed$ } = newBackend();
    const sut = new MetricsService(backend.bus, backend.tasks);
    sut.onModuleInit();
    const model = { call_id: 'call_1', role: 'orchestrator', model: 'm', content: 'x', latency_ms: 1 };
    committed$.next(committed('MODEL_RESPONDED', { ...model, usage: usage(10, 3) }));
    committed$.next(
      committed('MODEL_RESPONDED', {
        ...model,
        usage: usage(5, 0),
        error: { kind: 'rate_limited', message: 'slow down' },
      }),
    );
    const result = { tool: 'read_file', ok: false, output: null, error: 'missing' };
    committed$.next(
      committed('TOOL_COMPLETED', { call_id: 'call_2', tool: 'read_file', result, duration_ms: 1 }),
    );
    committed$.next(
      committed('TOOL_FAILED', {
        call_id: 'call_3',
        tool: 'shell',
        error: 'too slow',
        error_kind: 'timeout',
      }),
    );

    expect(await value(sut, 'runledger_events_appended_total', { type: 'MODEL_RESPONDED' })).toBe(2);
    expect(await value(sut, 'runledger_model_calls_total', { role: 'orchestrator', outcome: 'ok' })).toBe(1);
    expect(await value(sut, 'runledger_model_calls_total', { role: 'orchestrator', outcome: 'error' })).toBe(
      1,
    );
    expect(await value(sut, 'runledger_model_tokens_total', { role: 'orchestrator', kind: 'prompt' })).toBe(
      15,
    );
    expect(
      await value(sut, 'runledger_model_tokens_total', { role: 'orchestrator', kind: 'completion' }),
    ).toBe(3);
    expect(await value(sut, 'runledger_tool_calls_total', { tool: 'read_file', outcome: 'error' })).toBe(1);
    expect(await value(sut, 'runledger_tool_calls_total', { tool: 'shell', outcome: 'timeout' })).toBe(1);

    sut.onModuleDestroy();
    committed$.next(
      committed('TOOL_FAILED', {
        call_id: 'call_4',
        tool: 'shell',
        error: 'too slow',
        error_kind: 'timeout',
      }),
    );
    expect(await value(sut, 'runledger_tool_calls_total', { tool: 'shell', outcome: 'timeout' })).toBe(1);
  });

  it('reads tasks by status and WebSocket clients at scrape time, every status present', async () => {
    const { backend } = newBackend({ running: 2 });
    const sut = new MetricsService(backend.bus, backend.tasks);
    let clients = 3;
    sut.trackWsClients(() => clients);
    const text = await sut.render();
    expect(text).toMatch(/^runledger_tasks\{status="running"\} 2$/m);
    expect(text).toMatch(/^runledger_tasks\{status="completed"\} 0$/m);
    expect(text).toMatch(/^runledger_ws_clients 3$/m);
    clients = 1;
    expect(await sut.render()).toMatch(/^runledger_ws_clients 1$/m);
  });

  it('times a request into the histogram by method, route and status', async () => {
    const sut = newMetrics();
    const observe = sut.startRequestTimer();
    await new Promise((r) => setTimeout(r, 5));
    observe('GET', '/tasks/:task_id', 404);
    const labels = { method: 'GET', route: '/tasks/:task_id', status: '404' };
    const metric = await sut.registry.getSingleMetric('runledger_http_request_duration_seconds')!.get();
    const of = (name: string, le?: number) =>
      metric.values.find(
        (v) =>
          (v as { metricName?: string }).metricName === name &&
          Object.entries(labels).every(([k, l]) => String((v.labels as Record<string, unknown>)[k]) === l) &&
          (le === undefined || v.labels.le === le),
      )?.value;
    expect(of('runledger_http_request_duration_seconds_count')).toBe(1);
    expect(of('runledger_http_request_duration_seconds_sum')).toBeGreaterThanOrEqual(0.004);
    expect(of('runledger_http_request_duration_seconds_bucket', 0.001)).toBe(0);
    expect(of('runledger_http_request_duration_seconds_bucket', 10)).toBe(1);
  });

  it('keeps each instance on a registry of its own (two apps in one process do not collide)', async () => {
    const first = newMetrics();
    const second = newMetrics();
    first.startRequestTimer()('GET', '/health', 200);
    expect(first.registry).not.toBe(second.registry);
    expect(await first.render()).toContain('runledger_http_request_duration_seconds_count');
    expect(await second.render()).not.toMatch(/^runledger_http_request_duration_seconds_count/m);
    expect(await second.render()).toMatch(/^process_cpu_seconds_total \d/m);
  });
});
