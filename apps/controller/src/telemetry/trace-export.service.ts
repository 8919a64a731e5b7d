import { BeforeApplicationShutdown, Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { ROOT_CONTEXT, Span, SpanKind, SpanStatusCode, Tracer, trace } from '@opentelemetry/api';
import type { BasicTracerProvider, SpanExporter } from '@opentelemetry/sdk-trace-base';
import { Subscription, filter } from 'rxjs';
import { isFinalEventType } from '@runledger/contracts';
import { EventBus, EventStore } from '@runledger/event-store';
import { RuntimeLogger } from '@runledger/runtime';
import { SpanDescription, taskSpans } from './genai-spans';

/** How traces leave the process; null when tracing is off (no provider, no exporter, nothing sent). */
export interface TraceExportOptions {
  exporter: SpanExporter;
  serviceName: string;
  captureContent: boolean;
  /** the batch processor's delay between two exports */
  scheduledDelayMillis: number;
}

export const TRACE_EXPORT_OPTIONS = Symbol('TRACE_EXPORT_OPTIONS');

/**
 * Exports each task's GenAI spans once the task has finished. The spans are built from the task's
 * committed log when its final event is committed, not opened and closed live: the log is the one
 * source (a task resumed after a restart, or replayed, still yields whole spans with their parents),
 * and no span is left open in memory across a task that waits days for a permission. The cost is
 * that a task's trace appears when it ends. The SDK's batch processor sends them in the background.
 */
@Injectable()
export class TraceExportService implements OnModuleInit, BeforeApplicationShutdown {
  private provider: BasicTracerProvider | null = null;
  private subscription: Subscription | null = null;
  private readonly pending = new Set<Promise<void>>();

  constructor(
    @Inject(TRACE_EXPORT_OPTIONS) private readonly options: TraceExportOptions | null,
    @Inject(EventStore) private readonly store: EventStore,
    @Inject(EventBus) private readonly bus: EventBus,
    @Inject(RuntimeLogger) private readonly log: RuntimeLogger,
  ) {}

  get enabled(): boolean {
    return this.provider !== null;
  }

  onModuleInit(): void {
    const o = this.options;
    if (!o) return;
    // required here, where traces are exported: the tracing SDK is most of what a CLI command would load for nothing
    /* eslint-disable @typescript-eslint/no-require-imports */
    const { defaultResource, resourceFromAttributes } =
      require('@opentelemetry/resources') as typeof import('@opentelemetry/resources');
    const { BasicTracerProvider, BatchSpanProcessor } =
      require('@opentelemetry/sdk-trace-base') as typeof import('@opentelemetry/sdk-trace-base');
    /* eslint-enable @typescript-eslint/no-require-imports */
    this.provider = new BasicTracerProvider({
      resource: defaultResource().merge(resourceFromAttributes({ 'service.name': o.serviceName })),
      spanProcessors: [new BatchSpanProcessor(o.exporter, { scheduledDelayMillis: o.scheduledDelayMillis })],
    });
    // a tracer of our own provider, never the global one: tracing another app in this process is not ours to decide
    const tracer = this.provider.getTracer('runledger');
    this.subscription = this.bus.events$
      .pipe(filter((e) => isFinalEventType(e.type)))
      .subscribe((e) => this.track(this.exportTask(tracer, e.task_id, o.captureContent)));
  }

  /** the tasks still being read are exported, then the batch is flushed, before the storage closes */
  async beforeApplicationShutdown(): Promise<void> {
    this.subscription?.unsubscribe();
    await Promise.allSettled([...this.pending]);
    try {
      await this.provider?.shutdown();
    } catch (err) {
      // a collector that is down loses these traces; it must not keep the storage from closing
      this.log.warn({ err }, 'traces not flushed on shutdown');
    }
  }

  private async exportTask(tracer: Tracer, taskId: string, captureContent: boolean): Promise<void> {
    try {
      const events = await this.store.readWholeStream(taskId);
      recordSpans(tracer, taskSpans(events, { captureContent }));
    } catch (err) {
      this.log.warn({ task_id: taskId, err }, 'task trace not exported');
    }
  }

  private track(work: Promise<void>): void {
    this.pending.add(work);
    void work.finally(() => this.pending.delete(work));
  }
}

const SPAN_KINDS: Record<SpanDescription['kind'], SpanKind> = {
  internal: SpanKind.INTERNAL,
  client: SpanKind.CLIENT,
};

/**
 * Starts and ends SDK spans as described, with the log's times. Parents come before their children
 * in `spans`; each child starts in its parent's context, so it joins the parent's trace under it.
 */
export function recordSpans(tracer: Tracer, spans: readonly SpanDescription[]): void {
  const started = new Map<string, Span>();
  for (const d of spans) {
    const parent = d.parent_id === null ? undefined : started.get(d.parent_id);
    if (d.parent_id !== null && !parent)
      throw new Error(`span ${d.id} comes before its parent ${d.parent_id}`);
    const context = parent ? trace.setSpan(ROOT_CONTEXT, parent) : ROOT_CONTEXT;
    const span = tracer.startSpan(
      d.name,
      { kind: SPAN_KINDS[d.kind], startTime: d.start_ms, attributes: d.attributes, root: !parent },
      context,
    );
    if (d.status.code === 'error') span.setStatus({ code: SpanStatusCode.ERROR, message: d.status.message });
    span.end(d.end_ms);
    // an ended span still parents: its children need only its context
    started.set(d.id, span);
  }
}
