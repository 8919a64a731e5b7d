import { Inject, Injectable, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { Subscription } from 'rxjs';
import { RuntimeEvent, TASK_STATUSES } from '@runledger/contracts';
import { EventBus } from '@runledger/event-store';
import { TaskViews } from '@runledger/runtime';

const REQUEST_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * Prometheus metrics on a registry of this app's own (the global default registry would be shared by
 * every app in one process, and registering our metrics twice throws). Counters are fed from the
 * committed-event stream (so they count since this process started, as Prometheus counters do);
 * tasks by status is read from the projection at scrape time; the process and Node.js metrics are
 * prom-client's defaults.
 */
@Injectable()
export class MetricsService implements OnModuleInit, OnModuleDestroy {
  readonly registry = new Registry();
  private readonly events = this.counter(
    'runledger_events_appended_total',
    'Events committed to the log, by type',
    ['type'],
  );
  private readonly modelCalls = this.counter(
    'runledger_model_calls_total',
    'Model calls answered, by role and outcome',
    ['role', 'outcome'],
  );
  private readonly modelTokens = this.counter(
    'runledger_model_tokens_total',
    'Model tokens, by role and kind (prompt/completion)',
    ['role', 'kind'],
  );
  private readonly toolCalls = this.counter(
    'runledger_tool_calls_total',
    'Tool call outcomes, by tool and outcome',
    ['tool', 'outcome'],
  );
  private readonly requests = new Histogram({
    name: 'runledger_http_request_duration_seconds',
    help: 'HTTP request latency, by method, route and status',
    labelNames: ['method', 'route', 'status'],
    buckets: REQUEST_BUCKETS,
    registers: [this.registry],
  });
  private subscription: Subscription | null = null;
  private wsClients: () => number = () => 0;

  constructor(
    @Inject(EventBus) private readonly bus: EventBus,
    @Inject(TaskViews) private readonly tasks: TaskViews,
  ) {
    collectDefaultMetrics({ register: this.registry });
    const read = { tasks, wsClients: () => this.wsClients() };
    new Gauge({
      name: 'runledger_tasks',
      help: 'Tasks by status (from the projection)',
      labelNames: ['status'],
      registers: [this.registry],
      async collect() {
        const byStatus = await read.tasks.countByStatus();
        for (const status of TASK_STATUSES) this.set({ status }, byStatus[status] ?? 0);
      },
    });
    new Gauge({
      name: 'runledger_ws_clients',
      help: 'Connected WebSocket clients',
      registers: [this.registry],
      collect() {
        this.set(read.wsClients());
      },
    });
  }

  onModuleInit(): void {
    this.subscription = this.bus.events$.subscribe((e) => this.count(e));
  }

  onModuleDestroy(): void {
    this.subscription?.unsubscribe();
  }

  /** the gateway registers itself so the gauge reads the live count */
  trackWsClients(read: () => number): void {
    this.wsClients = read;
  }

  /** starts a request's clock; the returned function records it once its route and status are known */
  startRequestTimer(): (method: string, route: string, status: number) => void {
    const stop = this.requests.startTimer();
    return (method, route, status) => stop({ method, route, status: String(status) });
  }

  private count(e: RuntimeEvent): void {
    this.events.inc({ type: e.type });
    switch (e.type) {
      case 'MODEL_RESPONDED':
        this.modelCalls.inc({ role: e.payload.role, outcome: e.payload.error ? 'error' : 'ok' });
        this.modelTokens.inc({ role: e.payload.role, kind: 'prompt' }, e.payload.usage.prompt_tokens);
        this.modelTokens.inc({ role: e.payload.role, kind: 'completion' }, e.payload.usage.completion_tokens);
        break;
      case 'TOOL_COMPLETED':
        this.toolCalls.inc({ tool: e.payload.tool, outcome: e.payload.result.ok ? 'ok' : 'error' });
        break;
      case 'TOOL_FAILED':
        this.toolCalls.inc({ tool: e.payload.tool, outcome: e.payload.error_kind });
        break;
      default:
        break;
    }
  }

  /** the Prometheus text exposition of every metric of this app */
  render(): Promise<string> {
    return this.registry.metrics();
  }

  /** A counter of this app's registry. */
  private counter<Label extends string>(
    name: string,
    help: string,
    labelNames: readonly Label[],
  ): Counter<Label> {
    return new Counter({ name, help, labelNames, registers: [this.registry] });
  }
}
