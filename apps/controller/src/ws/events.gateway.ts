import { IncomingMessage } from 'node:http';
import { Socket } from 'node:net';
import { BeforeApplicationShutdown, Inject } from '@nestjs/common';
import {
  OnGatewayConnection,
  OnGatewayDisconnect,
  OnGatewayInit,
  WebSocketGateway,
} from '@nestjs/websockets';
import { Logger } from 'pino';
import { RawData, ServerOptions, VerifyClientCallbackAsync, WebSocket, WebSocketServer } from 'ws';
import {
  IllegalStateError,
  NotFoundError,
  RuntimeEvent,
  UnauthorizedError,
  ValidationError,
} from '@runledger/contracts';
import { requireScope } from '../auth/auth.guard';
import { bearerChallenge, originOf } from '../auth/protected-resource';
import { Principal, Scope } from '../auth/scopes';
import { TokenRegistry, bearerToken } from '../auth/token-registry';
import { APP_CONFIG, AppConfig } from '../config';
import { WsClientMessage, WsServerMessage } from '../dtos/ws.dto';
import { parseOrThrow } from '../dtos/zod.pipe';
import { toErrorResponse } from '../errors/error-body';
import { EventBus, EventStore, RawEvent, archivedRangesThrough } from '@runledger/event-store';
import { TaskViews } from '@runledger/runtime';
import { Subscription, filter } from 'rxjs';
import { EventSource, Follow, FollowCursor, eventSourceOf, followEvents } from '../streaming/follow-events';
import { LOGGER } from '../tokens';
import { MetricsService } from '../metrics/metrics.service';

/** Close codes: 4401 bad/missing auth, 4008 slow consumer (policy), 1001 server going away. */
export const WS_CLOSE = { unauthorized: 4401, slowConsumer: 4008, goingAway: 1001 } as const;
export const AUTH_TIMEOUT_MS = 10_000;
export const MAX_SUBSCRIPTIONS = 100;
export const MAX_MESSAGE_BYTES = 64 * 1024;
/** frames past this close the socket (1009) before they are buffered; up to it, an oversized message gets an error reply */
export const MAX_FRAME_BYTES = 1024 * 1024;

interface Client {
  ws: WebSocket;
  /** the TCP socket under `ws`: corked while a batch of event frames is written, so they go out in one write */
  socket: Socket;
  principal: Principal | null;
  subs: Map<string, Follow>;
  alive: boolean;
  nextSub: number;
  authTimer: NodeJS.Timeout | null;
  dropped: boolean;
  /** messages are handled one after another, in the order they arrived */
  inbox: Promise<void>;
}

/**
 * WebSocket endpoint /ws on the HTTP server (Nest's ws adapter): auth,
 * subscribe (one task from after_seq), subscribe_all (the global log from
 * after_position), unsubscribe. Each subscription follows replay-then-live with
 * its own bounded queue; a client whose unsent bytes pass
 * RUNLEDGER_WS_MAX_BUFFER is closed with 4008.
 *
 * Messages are dispatched here on their `type` rather than through
 * @SubscribeMessage: the protocol (DESIGN.md) has no `event` field, every bad
 * message must get an `{type:"error"}` reply, and a client's messages must be
 * answered in the order they arrived, which the adapter's concurrent handlers
 * do not promise.
 */
@WebSocketGateway({ path: '/ws', maxPayload: MAX_FRAME_BYTES })
export class EventsGateway
  implements
    OnGatewayInit<WebSocketServer>,
    OnGatewayConnection<WebSocket>,
    OnGatewayDisconnect<WebSocket>,
    BeforeApplicationShutdown
{
  private readonly clients = new Map<WebSocket, Client>();
  private heartbeat: NodeJS.Timeout | null = null;
  private readonly events: EventSource;
  private readonly store: EventStore;
  private readonly bus: EventBus;

  constructor(
    @Inject(TaskViews) private readonly tasks: TaskViews,
    @Inject(EventStore) store: EventStore,
    @Inject(EventBus) bus: EventBus,
    @Inject(TokenRegistry) private readonly tokens: TokenRegistry,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @Inject(LOGGER) private readonly log: Logger,
    @Inject(MetricsService) metrics: MetricsService,
  ) {
    this.store = store;
    this.bus = bus;
    this.events = eventSourceOf(store, bus);
    metrics.trackWsClients(() => this.clients.size);
  }

  afterInit(server: WebSocketServer): void {
    // a bearer header, when the client sends one, is checked before the upgrade: a wrong
    // token gets an HTTP 401 and never a socket; without one the first message must be auth
    const verifyClient: VerifyClientCallbackAsync<IncomingMessage> = ({ req }, done) => {
      const header = req.headers.authorization;
      if (header === undefined || this.tokens.authenticate(bearerToken(header) ?? '')) return done(true);
      const origin = originOf({ host: req.headers.host, secure: 'encrypted' in req.socket });
      done(false, 401, 'Unauthorized', { 'WWW-Authenticate': bearerChallenge(origin, true) });
    };
    (server.options as ServerOptions).verifyClient = verifyClient;
    this.heartbeat = setInterval(() => this.beat(), this.config.RUNLEDGER_WS_HEARTBEAT_MS);
    this.heartbeat.unref();
  }

  /** Runs before Nest's adapter terminates the sockets, so clients get a clean 1001 with a reason. */
  beforeApplicationShutdown(): void {
    if (this.heartbeat) clearInterval(this.heartbeat);
    for (const c of this.clients.values()) {
      this.dispose(c);
      c.ws.close(WS_CLOSE.goingAway, 'server shutting down');
    }
  }

  handleConnection(ws: WebSocket, req: IncomingMessage): void {
    const header = req.headers.authorization;
    const principal = header === undefined ? null : this.tokens.authenticate(bearerToken(header) ?? '');
    const client: Client = {
      ws,
      socket: req.socket,
      principal,
      subs: new Map(),
      alive: true,
      nextSub: 1,
      authTimer: null,
      dropped: false,
      inbox: Promise.resolve(),
    };
    this.clients.set(ws, client);
    if (!principal) {
      client.authTimer = setTimeout(
        () => ws.close(WS_CLOSE.unauthorized, 'no auth message in time'),
        AUTH_TIMEOUT_MS,
      );
    }
    this.log.debug({ client: principal?.name ?? null, ws_clients: this.clients.size }, 'ws connected');
    ws.on('pong', () => (client.alive = true));
    ws.on('message', (data: RawData, isBinary: boolean) => {
      // a subscribe awaits the store: without the queue an unsubscribe or ping sent right after
      // it would be answered first (and the unsubscribe would find nothing to stop)
      client.inbox = client.inbox
        .then(() => this.onMessage(client, data, isBinary))
        .catch((err: unknown) => this.replyError(client, err))
        .catch((err: unknown) => this.log.error({ err }, 'ws error reply failed'));
    });
  }

  handleDisconnect(ws: WebSocket): void {
    const client = this.clients.get(ws);
    if (!client) return;
    this.dispose(client);
    this.clients.delete(ws);
  }

  private async onMessage(client: Client, data: RawData, isBinary: boolean): Promise<void> {
    if (isBinary) throw new ValidationError('binary frames are not supported; send JSON text');
    const size = Array.isArray(data)
      ? data.reduce((n, b) => n + b.length, 0)
      : Buffer.isBuffer(data)
        ? data.length
        : data.byteLength;
    if (size > MAX_MESSAGE_BYTES)
      return this.send(client, {
        type: 'error',
        error: 'payload_too_large',
        message: `message of ${size} bytes; at most ${MAX_MESSAGE_BYTES}`,
        details: { max_bytes: MAX_MESSAGE_BYTES },
      });
    let raw: unknown;
    try {
      raw = JSON.parse(data.toString());
    } catch {
      throw new ValidationError('message is not valid JSON');
    }
    const msg = parseOrThrow(WsClientMessage, raw, 'message');
    if (msg.type === 'auth') return this.auth(client, msg.token);
    if (msg.type === 'ping') return this.send(client, { type: 'pong' });
    if (!client.principal) throw new UnauthorizedError('send {"type":"auth","token":...} first');
    switch (msg.type) {
      case 'subscribe': {
        this.require(client, 'tasks:read');
        if (!(await this.tasks.get(msg.task_id)))
          throw new NotFoundError(`task ${msg.task_id} not found`, { task_id: msg.task_id });
        const id = this.claimId(client, msg.subscription_id);
        this.send(client, {
          type: 'subscribed',
          subscription_id: id,
          task_id: msg.task_id,
          after_seq: msg.after_seq,
          ...(msg.include_children ? { include_children: true } : {}),
        });
        if (msg.include_children) return this.followTree(client, id, msg.task_id, msg.after_seq);
        return this.follow(client, id, { kind: 'task', task_id: msg.task_id, after_seq: msg.after_seq });
      }
      case 'subscribe_all': {
        this.require(client, 'admin');
        const id = this.claimId(client, msg.subscription_id);
        // stretches archived from now on are told as they commit (a TASKS_ARCHIVED heard before the
        // head is read may be told twice: its segment_id names it)
        const told = this.tellArchived(client, id, msg.after_position);
        // archived stretches after the cursor through the head: their positions will not come, and are not lost
        const head = (await this.store.head()).position;
        const { archived, through } = await archivedRangesThrough(
          this.store,
          msg.after_position,
          Math.max(msg.after_position, head),
        );
        this.send(client, {
          type: 'subscribed',
          subscription_id: id,
          after_position: msg.after_position,
          head_position: head,
          archived_through: through,
          ...(archived.length > 0 ? { archived } : {}),
        });
        this.follow(client, id, {
          kind: 'all',
          after_position: msg.after_position,
          types: msg.types,
          task_id: msg.task_id,
        });
        const follow = client.subs.get(id);
        if (!follow) return told.unsubscribe();
        client.subs.set(id, {
          stop: () => {
            told.unsubscribe();
            follow.stop();
          },
          done: follow.done.finally(() => told.unsubscribe()),
        });
        return;
      }
      case 'unsubscribe': {
        const sub = client.subs.get(msg.subscription_id);
        if (!sub)
          throw new NotFoundError(`no subscription ${msg.subscription_id}`, {
            subscription_id: msg.subscription_id,
          });
        sub.stop();
        client.subs.delete(msg.subscription_id);
        return this.send(client, { type: 'unsubscribed', subscription_id: msg.subscription_id });
      }
    }
  }

  private auth(client: Client, token: string): void {
    if (client.principal) throw new IllegalStateError('already authenticated');
    const principal = this.tokens.authenticate(token);
    if (!principal) {
      this.replyError(client, new UnauthorizedError('invalid token'));
      client.ws.close(WS_CLOSE.unauthorized, 'invalid token');
      return;
    }
    client.principal = principal;
    if (client.authTimer) clearTimeout(client.authTimer);
    this.send(client, { type: 'authenticated', name: principal.name, scopes: [...principal.scopes] });
  }

  private require(client: Client, scope: Scope): void {
    if (!client.principal) throw new UnauthorizedError('not authenticated');
    requireScope(client.principal, scope);
  }

  private claimId(client: Client, wanted: string | undefined): string {
    if (client.subs.size >= MAX_SUBSCRIPTIONS)
      throw new IllegalStateError(`at most ${MAX_SUBSCRIPTIONS} subscriptions per connection`);
    const id = wanted ?? `s${client.nextSub++}`;
    if (client.subs.has(id))
      throw new IllegalStateError(`subscription ${id} already exists`, { subscription_id: id });
    return id;
  }

  /**
   * Each archive batch that commits while a `subscribe_all` runs, as an `archived` message: the
   * segment's range, when it reaches past the subscription's cursor. Its events at positions the
   * subscriber has not received yet do not come on the subscription (the follow reads the live log);
   * GET /tasks/:id/events serves them.
   */
  private tellArchived(client: Client, id: string, afterPosition: number): Subscription {
    let telling = Promise.resolve();
    return this.bus.events$.pipe(filter((e) => e.type === 'TASKS_ARCHIVED')).subscribe((e) => {
      const { segment_id } = (e as RuntimeEvent<'TASKS_ARCHIVED'>).payload;
      telling = telling
        .then(async () => {
          const ranges = (await this.store.archivedRangesOf([segment_id])).filter(
            (r) => r.last_position > afterPosition,
          );
          if (ranges.length === 0 || !client.subs.has(id) || client.ws.readyState !== WebSocket.OPEN) return;
          this.send(client, {
            type: 'archived',
            subscription_id: id,
            position: e.position,
            archived: ranges,
          });
        })
        .catch((err: unknown) => this.log.error({ err, segment_id }, 'ws archived range not told'));
    });
  }

  private follow(client: Client, id: string, cursor: FollowCursor): void {
    // the socket may have closed while the subscribe was checked: nothing to follow for
    if (client.ws.readyState !== WebSocket.OPEN || client.dropped) return;
    const follow = followEvents(this.events, cursor, (events) => this.sendEvents(client, id, events), {
      onOverflow: (queued) => this.slowConsumer(client, `${queued} live events queued`),
      onError: (err) => {
        this.log.error({ err }, 'ws subscription failed');
        this.replyError(client, err);
        client.subs.delete(id);
      },
    });
    client.subs.set(id, follow);
  }

  /**
   * A task and every task below it under one subscription: each task is
   * followed on its own (replay then live, in order within it), and a child is
   * followed from its first event once its CHILD_TASK_STARTED is delivered.
   */
  private followTree(client: Client, id: string, taskId: string, afterSeq: number): void {
    if (client.ws.readyState !== WebSocket.OPEN || client.dropped) return;
    const follows: Follow[] = [];
    let stopped = false;
    const stopAll = () => {
      stopped = true;
      for (const f of follows) f.stop();
    };
    const start = (task_id: string, after_seq: number) => {
      if (stopped) return;
      follows.push(
        followEvents(
          this.events,
          { kind: 'task', task_id, after_seq },
          (events) =>
            this.sendEvents(client, id, events, (e) => {
              if (e.type !== 'CHILD_TASK_STARTED') return;
              const started = (JSON.parse(e.json) as RuntimeEvent<'CHILD_TASK_STARTED'>).payload;
              // a remote agent's task has no log here: what the parent recorded of it is in the parent's
              if (!started.remote) start(started.child_task_id, 0);
            }),
          {
            onOverflow: (queued) => this.slowConsumer(client, `${queued} live events queued`),
            onError: (err) => {
              this.log.error({ err }, 'ws subscription failed');
              this.replyError(client, err);
              stopAll();
              client.subs.delete(id);
            },
          },
        ),
      );
    };
    start(taskId, afterSeq);
    client.subs.set(id, {
      stop: stopAll,
      get done() {
        return Promise.all(follows.map((f) => f.done)).then(() => undefined);
      },
    });
  }

  /**
   * A page of events as `{type:"event", subscription_id, event}` frames written around each event's
   * stored JSON text, corked into one socket write unless the client's buffer asks for pacing.
   * `sent` hears each event once its frame is written.
   */
  private async sendEvents(
    client: Client,
    id: string,
    events: readonly RawEvent[],
    sent?: (e: RawEvent) => void,
  ): Promise<'stop' | void> {
    const head = `{"type":"event","subscription_id":${JSON.stringify(id)},"event":`;
    const max = this.config.RUNLEDGER_WS_MAX_BUFFER;
    client.socket.cork();
    try {
      for (const e of events) {
        if (client.ws.readyState !== WebSocket.OPEN) return 'stop';
        this.sendText(client, `${head}${e.json}}`);
        sent?.(e);
        if (client.ws.bufferedAmount > max / 4) {
          client.socket.uncork();
          await this.paced(client);
          client.socket.cork();
        }
      }
    } finally {
      client.socket.uncork();
    }
  }

  /**
   * Replay is paced by the client: wait while the socket holds a quarter of the
   * allowed buffer. A client that does not drain within a heartbeat interval is
   * treated as stuck and dropped.
   */
  private async paced(client: Client): Promise<void> {
    const max = this.config.RUNLEDGER_WS_MAX_BUFFER;
    if (client.ws.bufferedAmount <= max / 4) return;
    const started = Date.now();
    const limit = this.config.RUNLEDGER_WS_HEARTBEAT_MS;
    while (client.ws.readyState === WebSocket.OPEN && client.ws.bufferedAmount > max / 8) {
      if (Date.now() - started > limit)
        return this.slowConsumer(client, `send buffer did not drain in ${limit} ms`);
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  /** A client still holding more than the allowed unsent bytes when the next message is due is too slow. */
  private send(client: Client, message: WsServerMessage): void {
    this.sendText(client, JSON.stringify(message));
  }

  /** A message already in JSON text (an event frame built around the stored event). */
  private sendText(client: Client, text: string): void {
    if (client.ws.readyState !== WebSocket.OPEN) return;
    if (client.ws.bufferedAmount > this.config.RUNLEDGER_WS_MAX_BUFFER) {
      this.slowConsumer(client, `more than ${this.config.RUNLEDGER_WS_MAX_BUFFER} bytes unsent`);
      return;
    }
    client.ws.send(text);
  }

  private slowConsumer(client: Client, why: string): void {
    if (client.dropped) return;
    client.dropped = true;
    this.log.warn({ client: client.principal?.name ?? null, why }, 'ws slow consumer disconnected');
    this.dispose(client);
    client.ws.close(WS_CLOSE.slowConsumer, `slow consumer: ${why}`.slice(0, 120));
    setTimeout(() => client.ws.terminate(), Math.max(1000, this.config.RUNLEDGER_WS_HEARTBEAT_MS)).unref();
  }

  private replyError(client: Client, err: unknown): void {
    const { body, fault } = toErrorResponse(err);
    if (fault) this.log.error({ err }, 'ws handler failed');
    this.send(client, { type: 'error', ...body });
  }

  private dispose(client: Client): void {
    for (const sub of client.subs.values()) sub.stop();
    client.subs.clear();
    if (client.authTimer) clearTimeout(client.authTimer);
  }

  private beat(): void {
    for (const c of this.clients.values()) {
      if (!c.alive) {
        this.log.info({ client: c.principal?.name ?? null }, 'ws peer missed a heartbeat; dropped');
        this.dispose(c);
        this.clients.delete(c.ws);
        c.ws.terminate();
        continue;
      }
      c.alive = false;
      c.ws.ping();
    }
  }
}
