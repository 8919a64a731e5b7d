import { SpanStatusCode } from '@opentelemetry/api';
import { InMemorySpanExporter, ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { NewEvent } from '@runledger/contracts';
import { EventBus, InMemoryEventStore } from '@runledger/event-store';
import { RuntimeLogger } from '@runledger/runtime';
import { loadConfig } from '../config';
import { GEN_AI } from './genai-spans';
import { otlpTracesUrl, traceExportOptionsFromConfig } from './telemetry.module';
import { TraceExportService } from './trace-export.service';

const usage = { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 };
const taskUsage = {
  rounds: 1,
  tool_calls: 1,
  model_calls: 1,
  failures: 0,
  ...usage,
  cost_usd: 0,
  by_role: {},
};

const at = (ms: number) => new Date(Date.parse('2026-01-01T00:00:00.000Z') + ms).toISOString();

/** one task's whole log, as the runtime writes it */
const taskLog = (final: NewEvent): NewEvent[] => [
  { type: 'TASK_RECEIVED', payload: { input: 'hi', session_id: 'sess_1' } as never, created_at: at(0) },
  {
    type: 'MODEL_CALLED',
    payload: {
      call_id: 'mc_1',
      role: 'orchestrator',
      model: 'm1',
      backend: 'scripted',
      prompt_chars: 2,
    } as never,
    created_at: at(5),
  },
  {
    type: 'MODEL_RESPONDED',
    payload: {
      call_id: 'mc_1',
      role: 'orchestrator',
      model: 'm1',
      content: 'x',
      usage,
      latency_ms: 5,
    } as never,
    created_at: at(10),
  },
  {
    type: 'TOOL_CALLED',
    payload: { call_id: 'tc_1', tool: 'shell', args: {}, args_hash: 'h' } as never,
    created_at: at(15),
  },
  {
    type: 'TOOL_FAILED',
    payload: { call_id: 'tc_1', tool: 'shell', error: 'exit 2', error_kind: 'tool_error' } as never,
    created_at: at(20),
  },
  { ...final, created_at: at(30) },
];

const completed: NewEvent = {
  type: 'TASK_COMPLETED',
  payload: { stop_reason: 'completed', detail: 'ok', usage: taskUsage, result: 'done' },
};

function newService(options: { exporter?: InMemorySpanExporter | null } = {}) {
  const store = new InMemoryEventStore();
  const bus = new EventBus(store);
  const log = { warn: jest.fn(), error: jest.fn(), info: jest.fn() } as unknown as RuntimeLogger;
  const exporter = options.exporter === undefined ? new KeepingExporter() : options.exporter;
  const sut = new TraceExportService(
    exporter ? { exporter, serviceName: 'rl-test', captureContent: false, scheduledDelayMillis: 10 } : null,
    store,
    bus,
    log,
  );
  sut.onModuleInit();
  return { sut, store, exporter, log };
}

const spanId = (s: ReadableSpan) => s.spanContext().spanId;

/** keeps what it received past shutdown (the SDK's in-memory exporter forgets it then), so the flush on close is visible */
class KeepingExporter extends InMemorySpanExporter {
  override shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

describe('TraceExportService', () => {
  it('exports a finished task as one trace: the invoke_agent root and its chat and execute_tool children', async () => {
    const { sut, store, exporter } = newService();
    await store.append('task_1', taskLog(completed), { expected: 'no_stream' });
    await sut.beforeApplicationShutdown();

    const spans = exporter!.getFinishedSpans();
    expect(spans.map((s) => s.name)).toEqual(['invoke_agent runledger', 'chat m1', 'execute_tool shell']);
    const [root, chat, tool] = spans;
    expect(root.parentSpanContext).toBeUndefined();
    for (const child of [chat, tool]) {
      expect(child.spanContext().traceId).toBe(root.spanContext().traceId);
      expect(child.parentSpanContext?.spanId).toBe(spanId(root));
    }
    expect(root.resource.attributes['service.name']).toBe('rl-test');
    expect(chat.attributes[GEN_AI.USAGE_INPUT_TOKENS]).toBe(7);
    expect(tool.status).toEqual({ code: SpanStatusCode.ERROR, message: 'exit 2' });
    // the log's times, not the export's
    const epochSeconds = Date.parse(at(0)) / 1000;
    expect(root.startTime).toEqual([epochSeconds, 0]);
    expect(root.endTime).toEqual([epochSeconds, 30_000_000]);
    expect(chat.duration).toEqual([0, 5_000_000]);
  });

  it('exports nothing for a task that has not finished, and each finished task once', async () => {
    const { sut, store, exporter } = newService();
    await store.append('task_1', taskLog(completed).slice(0, -1), { expected: 'no_stream' });
    await store.append('task_2', taskLog(completed), { expected: 'no_stream' });
    await sut.beforeApplicationShutdown();

    const roots = exporter!.getFinishedSpans().filter((s) => !s.parentSpanContext);
    expect(roots.map((s) => s.attributes['runledger.task_id'])).toEqual(['task_2']);
  });

  it('reports a log it cannot map instead of throwing into the event bus', async () => {
    const { sut, store, exporter, log } = newService();
    // a final event with no TASK_RECEIVED before it: not a whole task
    await store.append('task_1', [completed], { expected: 'no_stream' });
    await sut.beforeApplicationShutdown();

    expect(exporter!.getFinishedSpans()).toEqual([]);
    expect(log.warn).toHaveBeenCalledWith(
      expect.objectContaining({ task_id: 'task_1' }),
      'task trace not exported',
    );
  });

  it('logs a flush that fails on shutdown (collector down) instead of keeping the app from closing', async () => {
    const refusing = new InMemorySpanExporter();
    // a stopped in-memory exporter answers every export with a failure
    await refusing.shutdown();
    const { sut, store, log } = newService({ exporter: refusing });
    await store.append('task_1', taskLog(completed), { expected: 'no_stream' });

    await expect(sut.beforeApplicationShutdown()).resolves.toBeUndefined();
    expect(log.warn).toHaveBeenCalledWith(
      expect.objectContaining({ err: expect.any(Error) }),
      'traces not flushed on shutdown',
    );
  });

  it('does nothing without options: no provider, no subscription', async () => {
    const { sut, store } = newService({ exporter: null });
    await store.append('task_1', taskLog(completed), { expected: 'no_stream' });
    expect(sut.enabled).toBe(false);
    await expect(sut.beforeApplicationShutdown()).resolves.toBeUndefined();
  });
});

describe('trace export configuration', () => {
  it('is off unless an OTLP endpoint is set, and off when the SDK is disabled', () => {
    expect(traceExportOptionsFromConfig(loadConfig({}))).toBeNull();
    expect(otlpTracesUrl(loadConfig({}))).toBeNull();
    expect(
      otlpTracesUrl(
        loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'TRUE' }),
      ),
    ).toBeNull();
  });

  it('appends /v1/traces to the base endpoint and takes the traces endpoint as is', () => {
    expect(otlpTracesUrl(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }))).toBe(
      'http://collector:4318/v1/traces',
    );
    expect(
      otlpTracesUrl(
        loadConfig({
          OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
          OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://tempo:4318/otlp/traces',
        }),
      ),
    ).toBe('http://tempo:4318/otlp/traces');
  });

  it('names the service runledger unless OTEL_SERVICE_NAME says otherwise, and captures no content by default', () => {
    const base = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };
    expect(traceExportOptionsFromConfig(loadConfig(base))).toMatchObject({
      serviceName: 'runledger',
      captureContent: false,
    });
    expect(
      traceExportOptionsFromConfig(loadConfig({ ...base, OTEL_SERVICE_NAME: 'agents' }))?.serviceName,
    ).toBe('agents');
  });

  it('reads the content switch in both of its conventional forms and refuses anything else', () => {
    const capture = (v: string) =>
      loadConfig({ OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: v })
        .OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT;
    expect(['true', 'TRUE', 'SPAN_ONLY', 'span_and_event'].map(capture)).toEqual([true, true, true, true]);
    expect(['false', 'NO_CONTENT', 'EVENT_ONLY'].map(capture)).toEqual([false, false, false]);
    expect(() => capture('yes')).toThrow(/OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT/);
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' })).toThrow(
      /OTEL_EXPORTER_OTLP_ENDPOINT/,
    );
  });
});
