import { INestApplicationContext } from '@nestjs/common';
import { WsAdapter } from '@nestjs/platform-ws';
import { Logger } from 'pino';
import { WebSocket, WebSocketServer } from 'ws';

/**
 * Nest's ws adapter, as EventsGateway needs it:
 * - no message routing: the gateway reads and answers every message itself
 *   (in arrival order, errors as replies), so the adapter's JSON parse would be
 *   a second parse that finds no handler;
 * - a socket error is a client's fault (an oversized frame, bad UTF-8): ws
 *   closes that socket with the right code, and the log keeps it at debug
 *   instead of an error line with a stack trace per misbehaving client.
 */
export class EventsWsAdapter extends WsAdapter {
  constructor(
    app: INestApplicationContext,
    private readonly log: Logger,
  ) {
    super(app, { messageParser: () => undefined });
  }

  override bindErrorHandler(server: WebSocketServer): WebSocketServer {
    server.on('connection', (ws: WebSocket) =>
      ws.on('error', (err) => this.log.debug({ err: err.message }, 'ws socket error')),
    );
    server.on('error', (err) => this.log.error({ err }, 'ws server error'));
    return server;
  }
}
