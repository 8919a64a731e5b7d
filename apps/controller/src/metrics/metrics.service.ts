import { Inject, Injectable, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { Subscription } from 'rxjs';
import { RuntimeEvent, TASK_STATUSES } from '@runledger/contracts';
import { EventBus } from '@runledger/event-store';
import { TaskViews } from '@runledger/runtime';

const BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

type Labels = Record<string, string>;
const labelKey = (l: Labels) => JSON.stringify(Object.entries(l).sort());

class Counter {
  private readonly values = new Map<string, { labels: Labels; value: number }>();
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}
  inc(labels: Labels, by = 1): void {
    const k = labelKey(labels);
    const cur = this.values.get(k);
    if (cur) cur.value += by;
    else this.values.set(k, { labels, value: by });
  }
  render(): string[] {
    return [
      `# HELP ${this.name} ${this.help}`,
      `# TYPE ${this.name} counter`,
      ...[...this.values.values()].map((v) => `${this.name}${fmt(v.labels)} ${v.value}`),
    ];
  }
}

class Histogram {
  private readonly series = new Map<
    string,
    { labels: Labels; counts: number[]; sum: number; count: number }
  >();
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}
  observe(labels: Labels, value: number): void {
    const k = labelKey(labels);
    let s = this.series.get(k);
    if (!s) this.series.set(k, (s = { labels, counts: BUCKETS.map(() => 0), sum: 0, count: 0 }));
    BUCKETS.forEach((b, i) => {
      if (value <= b) s.counts[i]++;
    });
    s.sum += value;
    s.count++;
  }
  render(): string[] {
    const out = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    for (const s of this.series.values()) {
      BUCKETS.forEach((b, i) =>
        out.push(`${this.name}_bucket${fmt({ ...s.labels, le: String(b) })} ${s.counts[i]}`),
      );
      out.push(`${this.name}_bucket${fmt({ ...s.labels, le: '+Inf' })} ${s.count}`);
      out.push(`${this.name}_sum${fmt(s.labels)} ${s.sum}`, `${this.name}_count${fmt(s.labels)} ${s.count}`);
    }
    return out;
  }
}

const escape = (v: string) => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
const fmt = (l: Labels) => {
  const e = Object.entries(l);
  return e.length ? `{${e.map(([k, v]) => `${k}="${escape(v)}"`).join(',')}}` : '';
};

/**
 * Prometheus text metrics. Counters are fed from the committed-event stream
 * (so they count since this process started, as Prometheus counters do);
 * tasks by status is read from the projection at scrape time.
 */
@Injectable()
export class MetricsService implements OnModuleInit, OnModuleDestroy {
  private readonly events = new Counter(
    'runledger_events_appended_total',
    'Events committed to the log, by type',
  );
  private readonly modelCalls = new Counter(
    'runledger_model_calls_total',
    'Model calls answered, by role and outcome',
  );
  private readonly modelTokens = new Counter(
    'runledger_model_tokens_total',
    'Model tokens, by role and kind (prompt/completion)',
  );
  private readonly toolCalls = new Counter(
    'runledger_tool_calls_total',
    'Tool call outcomes, by tool and outcome',
  );
  private readonly requests = new Histogram(
    'runledger_http_request_duration_seconds',
    'HTTP request latency, by method, route and status',
  );
  private subscription: Subscription | null = null;
  private wsClients: () => number = () => 0;

  constructor(
    @Inject(EventBus) private readonly bus: EventBus,
    @Inject(TaskViews) private readonly tasks: TaskViews,
  ) {}

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

  observeRequest(method: string, route: string, status: number, seconds: number): void {
    this.requests.observe({ method, route, status: String(status) }, seconds);
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

  async render(): Promise<string> {
    const byStatus = await this.tasks.countByStatus();
    const lines = [
      '# HELP runledger_tasks Tasks by status (from the projection)',
      '# TYPE runledger_tasks gauge',
    ];
    for (const s of TASK_STATUSES) lines.push(`runledger_tasks${fmt({ status: s })} ${byStatus[s] ?? 0}`);
    lines.push(
      '# HELP runledger_ws_clients Connected WebSocket clients',
      '# TYPE runledger_ws_clients gauge',
      `runledger_ws_clients ${this.wsClients()}`,
    );
    for (const m of [this.events, this.modelCalls, this.modelTokens, this.toolCalls, this.requests])
      lines.push(...m.render());
    return `${lines.join('\n')}\n`;
  }
}
