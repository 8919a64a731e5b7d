import { Artifact } from '@a2a-js/sdk';
import { ConcurrencyError, NotFoundError, RuntimeEvent, isFinalEventType, newId } from '@runledger/contracts';
import { EventBus, EventStore } from '@runledger/event-store';
import { RuntimeLogger } from '@runledger/runtime';
import { Subscription } from 'rxjs';
import { notificationsOf } from './notification-formats';
import {
  CallbackFormat,
  CallbackState,
  DELIVERY_HEADER,
  RetryPolicy,
  SIGNATURE_HEADER,
  foldOutbox,
  nextDelivery,
  outboundStreamOf,
  retryAt,
  signatureOf,
  taskOfOutboundStream,
} from './outbox';

export interface OutboundOptions {
  /** the HMAC key every delivery is signed with */
  signingKey: Buffer;
  retry: RetryPolicy;
  /** how long one attempt holds its update: past it (the sender died) another instance tries again */
  claimMs: number;
  /** one request's time limit */
  requestTimeoutMs: number;
  /** how often tracked tasks are looked at even when nothing was heard (other instances' commits, due retries) */
  sweepMs: number;
  /** the artifacts of the files a task wrote, which the final A2A Task carries */
  filesOf?: (taskId: string) => Promise<Artifact[]>;
  /** the A2A header the receiver's own token travels in */
  tokenHeader?: string;
  logger: Pick<RuntimeLogger, 'warn' | 'error'>;
}

export interface RegisterCallback {
  task_id: string;
  url: string;
  token: string | null;
  format: CallbackFormat;
  callback_id?: string;
  /** updates of events after this sequence are delivered; the task's current last one when absent */
  from_seq?: number;
}

/**
 * Outbound deliveries, for A2A push notifications and task callbacks alike: each update of a task a
 * callback asked for is POSTed, signed (HMAC-SHA256 over the timestamp and body), retried with
 * exponential backoff, and every attempt and its outcome is an event of the task's outbound stream.
 * What is still to deliver is folded from that stream and the task's own, so a restart (or another
 * instance) finds it again; an attempt is claimed by an append with the stream's expected version,
 * so on a shared PostgreSQL log one instance sends it.
 */
export class OutboundDeliveries {
  private readonly tracked = new Set<string>();
  private readonly running = new Map<string, Promise<void>>();
  private readonly again = new Set<string>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private subscription: Subscription | null = null;
  private sweep: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(
    private readonly store: EventStore,
    private readonly bus: EventBus,
    private readonly options: OutboundOptions,
  ) {}

  async start(): Promise<void> {
    this.subscription = this.bus.events$.subscribe((e) => this.heard(e));
    for (let after = 0; ;) {
      const page = await this.store.readAll({
        after_position: after,
        limit: 1000,
        types: ['CALLBACK_REGISTERED'],
      });
      for (const e of page) if (e.type === 'CALLBACK_REGISTERED') this.track(e.payload.task_id);
      if (page.length < 1000) break;
      after = page[page.length - 1].position;
    }
    this.sweep = setInterval(() => {
      for (const taskId of this.tracked) this.schedule(taskId);
    }, this.options.sweepMs);
    this.sweep.unref();
  }

  async stop(): Promise<void> {
    this.closed = true;
    this.subscription?.unsubscribe();
    if (this.sweep) clearInterval(this.sweep);
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    await Promise.allSettled([...this.running.values()]);
  }

  async register(r: RegisterCallback): Promise<CallbackState> {
    const taskEvents = await this.store.readStream(r.task_id, { limit: 1 });
    const [first] = taskEvents;
    if (first?.type !== 'TASK_RECEIVED')
      throw new NotFoundError(`task ${r.task_id} not found`, { task_id: r.task_id });
    const callback_id = r.callback_id ?? newId('cb');
    const from_seq = r.from_seq ?? (await this.store.streamVersion(r.task_id));
    await this.store.append(
      outboundStreamOf(r.task_id),
      [
        {
          type: 'CALLBACK_REGISTERED',
          session_id: first.session_id,
          payload: {
            callback_id,
            task_id: r.task_id,
            url: r.url,
            token: r.token,
            format: r.format,
            from_seq,
          },
        },
      ],
      { expected: 'any' },
    );
    this.track(r.task_id);
    const state = (await this.outbox(r.task_id)).callbacks.get(callback_id)!;
    return state;
  }

  /** false when the task has no such callback */
  async remove(taskId: string, callbackId: string): Promise<boolean> {
    const c = (await this.outbox(taskId)).callbacks.get(callbackId);
    if (!c || c.removed) return false;
    const [first] = await this.store.readStream(taskId, { limit: 1 });
    await this.store.append(
      outboundStreamOf(taskId),
      [
        {
          type: 'CALLBACK_REMOVED',
          session_id: first?.session_id,
          payload: { callback_id: callbackId, task_id: taskId },
        },
      ],
      { expected: 'any' },
    );
    return true;
  }

  /** the task's callbacks still in force, in the order they were registered */
  async callbacks(taskId: string): Promise<CallbackState[]> {
    return [...(await this.outbox(taskId)).callbacks.values()].filter((c) => !c.removed);
  }

  /** resolves once nothing is being delivered for the task at this moment (tests, shutdown) */
  async idle(taskId: string): Promise<void> {
    while (this.running.has(taskId)) await this.running.get(taskId);
  }

  private async outbox(taskId: string) {
    return foldOutbox(await this.store.readWholeStream(outboundStreamOf(taskId)));
  }

  private heard(e: RuntimeEvent): void {
    if (e.type === 'CALLBACK_REGISTERED') this.track(e.payload.task_id);
    const taskId = taskOfOutboundStream(e.task_id) ?? e.task_id;
    if (this.tracked.has(taskId)) this.schedule(taskId);
  }

  private track(taskId: string): void {
    this.tracked.add(taskId);
    this.schedule(taskId);
  }

  /** one pass per task at a time; what is heard meanwhile runs one more */
  private schedule(taskId: string): void {
    if (this.closed) return;
    if (this.running.has(taskId)) {
      this.again.add(taskId);
      return;
    }
    const run = this.pass(taskId)
      .catch((err: unknown) =>
        this.options.logger.error({ task_id: taskId, err }, 'outbound delivery pass failed'),
      )
      .finally(() => {
        this.running.delete(taskId);
        if (this.again.delete(taskId)) this.schedule(taskId);
      });
    this.running.set(taskId, run);
  }

  private async pass(taskId: string): Promise<void> {
    const outbox = await this.outbox(taskId);
    const events = await this.store.readWholeStream(taskId);
    const ended = events.some((e) => isFinalEventType(e.type));
    let wakeAt: number | null = null;
    let busy = false;
    // read once a pass, and only for an ended task an A2A callback still has to be told of
    let files: Artifact[] | null = null;
    for (const c of outbox.callbacks.values()) {
      if (c.format === 'a2a' && ended && files === null && this.options.filesOf)
        files = await this.options.filesOf(taskId);
      const notifications = notificationsOf(c.format, events, c.format === 'a2a' ? (files ?? []) : []);
      const next = nextDelivery(c, notifications, new Date());
      if (next.kind === 'idle') continue;
      busy = true;
      if (next.kind === 'wait') {
        wakeAt = Math.min(wakeAt ?? Infinity, Date.parse(next.until));
        continue;
      }
      const claimed = await this.claim(
        taskId,
        outbox.version,
        c,
        next.seq,
        next.attempt,
        events[0]?.session_id,
      );
      // another instance (or pass) took it: look again once its claim shows
      if (!claimed) return this.schedule(taskId);
      await this.deliver(taskId, c, claimed, next.seq, next.attempt, next.body, events[0]?.session_id);
      // the stream moved on: the next update (or another callback's) is decided on the new fold
      return this.schedule(taskId);
    }
    if (wakeAt !== null) this.wakeAt(taskId, wakeAt);
    if (!busy && ended) this.tracked.delete(taskId);
  }

  private wakeAt(taskId: string, at: number): void {
    clearTimeout(this.timers.get(taskId));
    const timer = setTimeout(
      () => {
        this.timers.delete(taskId);
        this.schedule(taskId);
      },
      Math.max(0, at - Date.now()) + 5,
    );
    timer.unref();
    this.timers.set(taskId, timer);
  }

  private async claim(
    taskId: string,
    version: number,
    c: CallbackState,
    seq: number,
    attempt: number,
    sessionId: string | undefined,
  ): Promise<string | null> {
    const delivery_id = newId('dlv');
    try {
      await this.store.append(
        outboundStreamOf(taskId),
        [
          {
            type: 'DELIVERY_STARTED',
            session_id: sessionId,
            payload: {
              delivery_id,
              callback_id: c.callback_id,
              seq,
              attempt,
              claimed_until: new Date(Date.now() + this.options.claimMs).toISOString(),
            },
          },
        ],
        { expected: version === 0 ? 'no_stream' : version },
      );
      return delivery_id;
    } catch (err) {
      if (err instanceof ConcurrencyError) return null;
      throw err;
    }
  }

  private async deliver(
    taskId: string,
    c: CallbackState,
    deliveryId: string,
    seq: number,
    attempt: number,
    body: unknown,
    sessionId: string | undefined,
  ): Promise<void> {
    const text = JSON.stringify(body);
    const started = Date.now();
    let status: number | null = null;
    let error: string | null = null;
    try {
      const res = await fetch(c.url, {
        method: 'POST',
        headers: {
          'content-type': c.format === 'a2a' ? 'application/a2a+json' : 'application/json',
          [SIGNATURE_HEADER]: signatureOf(this.options.signingKey, text, Math.floor(started / 1000)),
          [DELIVERY_HEADER]: deliveryId,
          ...(c.token ? { [this.options.tokenHeader ?? 'x-a2a-notification-token']: c.token } : {}),
        },
        body: text,
        redirect: 'manual',
        signal: AbortSignal.timeout(this.options.requestTimeoutMs),
      });
      status = res.status;
      await res.arrayBuffer().catch(() => undefined);
      if (res.status < 200 || res.status >= 300) error = `the receiver answered ${res.status}`;
    } catch (err) {
      error = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    }
    const common = { delivery_id: deliveryId, callback_id: c.callback_id, seq, attempt };
    await this.store.append(
      outboundStreamOf(taskId),
      [
        error === null
          ? {
              type: 'DELIVERY_SUCCEEDED',
              session_id: sessionId,
              payload: { ...common, status_code: status!, duration_ms: Date.now() - started },
            }
          : {
              type: 'DELIVERY_FAILED',
              session_id: sessionId,
              payload: {
                ...common,
                status_code: status,
                error: error.slice(0, 2000),
                retry_at: retryAt(this.options.retry, attempt, new Date()),
              },
            },
      ],
      { expected: 'any' },
    );
    if (error !== null)
      this.options.logger.warn(
        { task_id: taskId, callback_id: c.callback_id, delivery_id: deliveryId, attempt, status },
        'outbound delivery failed',
      );
  }
}
