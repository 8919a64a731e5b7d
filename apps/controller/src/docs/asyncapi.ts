import { z } from 'zod';
import { RuntimeEventEnvelope } from '@runledger/contracts';
import { WsClientMessage, WsServerMessages } from '../dtos/ws.dto';
import {
  AUTH_TIMEOUT_MS,
  MAX_FRAME_BYTES,
  MAX_MESSAGE_BYTES,
  MAX_SUBSCRIPTIONS,
  WS_CLOSE,
} from '../ws/events.gateway';
import { API_VERSION, BEARER_SCHEME } from './api-docs';

const CHANNEL = 'events';
const channelMessage = (name: string) => ({ $ref: `#/channels/${CHANNEL}/messages/${name}` });

/** What each client message does and what the server answers it with. */
const CLIENT_MESSAGES: Record<WsClientMessage['type'], { summary: string; reply: string[] }> = {
  auth: {
    summary: `First message when the upgrade carried no Authorization header (within ${AUTH_TIMEOUT_MS / 1000} s); a wrong token closes with ${WS_CLOSE.unauthorized}`,
    reply: ['authenticated', 'error'],
  },
  subscribe: {
    summary:
      "Follow one task's events after after_seq: replay, then live (scope tasks:read); with include_children, also every task it delegated to (and theirs), each from its first event, in order within each task",
    reply: ['subscribed', 'error'],
  },
  subscribe_all: {
    summary: 'Follow the global log after after_position, optionally by types or task_id (scope admin)',
    reply: ['subscribed', 'error'],
  },
  unsubscribe: { summary: 'Stop a subscription', reply: ['unsubscribed', 'error'] },
  ping: { summary: 'Application-level ping', reply: ['pong'] },
};

const SERVER_MESSAGES: Record<keyof typeof WsServerMessages, string> = {
  authenticated: 'The token was accepted; names the token and its scopes',
  subscribed: 'A subscription started; the events after the echoed cursor follow',
  archived:
    "subscribe_all: an archive batch committed while the subscription runs; its tasks' events past the subscriber's last position do not come on it (read them with GET /tasks/{id}/events)",
  unsubscribed: 'A subscription stopped',
  event: 'One event of a subscription, in order, with no gap and no duplicate',
  pong: 'Answer to ping',
  error: 'A message was refused ({error, message, details}, as over HTTP); the connection stays open',
};

/** Message payload schemas as JSON Schema, RuntimeEvent shared by reference. */
function payloadSchemas(): Record<string, unknown> {
  const registry = z.registry<{ id: string }>();
  registry.add(RuntimeEventEnvelope, { id: 'RuntimeEvent' });
  for (const option of WsClientMessage.options) registry.add(option, { id: option.shape.type.value });
  for (const [name, schema] of Object.entries(WsServerMessages)) registry.add(schema, { id: name });
  const { schemas } = z.toJSONSchema(registry, {
    io: 'input',
    unrepresentable: 'any',
    uri: (id) => `#/components/schemas/${id}`,
  });
  return Object.fromEntries(
    // the registry names each schema by its $id; in the document its place in components names it
    Object.entries(schemas).map(([id, { $schema: _dialect, $id: _id, ...schema }]) => [id, schema]),
  );
}

/** AsyncAPI 3.0 document of the WebSocket protocol on /ws, from the server's point of view. */
export function buildAsyncApiDocument(): Record<string, unknown> {
  const message = (name: string, summary: string) => ({
    name,
    title: name,
    summary,
    contentType: 'application/json',
    payload: { $ref: `#/components/schemas/${name}` },
  });
  const messages = {
    ...Object.fromEntries(
      Object.entries(CLIENT_MESSAGES).map(([name, m]) => [name, message(name, m.summary)]),
    ),
    ...Object.fromEntries(
      Object.entries(SERVER_MESSAGES).map(([name, summary]) => [name, message(name, summary)]),
    ),
  };
  const channel = { $ref: `#/channels/${CHANNEL}` };
  const receive = Object.fromEntries(
    Object.entries(CLIENT_MESSAGES).map(([name, m]) => [
      `receive_${name}`,
      {
        action: 'receive',
        channel,
        summary: m.summary,
        messages: [channelMessage(name)],
        reply: { channel, messages: m.reply.map(channelMessage) },
      },
    ]),
  );
  return {
    asyncapi: '3.0.0',
    info: {
      title: 'Runledger WebSocket API',
      version: API_VERSION,
      description: [
        'Watch tasks live or replay them over one WebSocket. Messages are JSON text frames.',
        '',
        `Auth: send \`Authorization: Bearer <token>\` with the upgrade (a wrong token is refused with HTTP 401 before the upgrade), or send \`{"type":"auth","token":...}\` as the first message within ${AUTH_TIMEOUT_MS / 1000} s. Any other message before auth gets an \`error\` (unauthorized).`,
        '',
        `Subscriptions: up to ${MAX_SUBSCRIPTIONS} per connection, each with its own id (given or \`s1\`, \`s2\`, ...). Every \`event\` names its subscription. Messages are answered in the order they arrive.`,
        '',
        `Limits: a message over ${MAX_MESSAGE_BYTES} bytes gets an \`error\` (payload_too_large); a frame over ${MAX_FRAME_BYTES} bytes closes the connection with 1009. Binary frames and invalid JSON get an \`error\` (validation_error).`,
        '',
        'Heartbeat: the server sends a WebSocket ping every RUNLEDGER_WS_HEARTBEAT_MS (30 s by default); a client that has not answered the previous ping with a pong is dropped. `{"type":"ping"}` is answered with `{"type":"pong"}`.',
        '',
        `Close codes: ${WS_CLOSE.unauthorized} invalid token or no auth in time; ${WS_CLOSE.slowConsumer} slow consumer (more than RUNLEDGER_WS_MAX_BUFFER bytes unsent, or the send buffer did not drain within a heartbeat interval); ${WS_CLOSE.goingAway} server shutting down; 1009 frame too large.`,
      ].join('\n'),
    },
    defaultContentType: 'application/json',
    servers: {
      runledger: {
        host: '{host}',
        protocol: 'ws',
        description: 'the controller; use wss behind a TLS proxy',
        variables: {
          host: { default: '127.0.0.1:3000', description: 'HOST:PORT the controller listens on' },
        },
        security: [{ $ref: `#/components/securitySchemes/${BEARER_SCHEME}` }],
      },
    },
    channels: {
      [CHANNEL]: {
        address: '/ws',
        title: 'Runledger events',
        description:
          'Client messages (auth, subscribe, subscribe_all, unsubscribe, ping) and server messages on one connection.',
        messages: Object.fromEntries(
          Object.keys(messages).map((name) => [name, { $ref: `#/components/messages/${name}` }]),
        ),
        bindings: {
          ws: {
            method: 'GET',
            headers: {
              type: 'object',
              properties: {
                Authorization: {
                  type: 'string',
                  pattern: '^Bearer \\S+$',
                  description: 'optional; without it the first message must be auth',
                },
              },
            },
            bindingVersion: '0.1.0',
          },
        },
        'x-close-codes': {
          [WS_CLOSE.unauthorized]: 'invalid token, or no auth message in time',
          [WS_CLOSE.slowConsumer]: 'slow consumer',
          [WS_CLOSE.goingAway]: 'server shutting down',
          1009: `frame larger than ${MAX_FRAME_BYTES} bytes`,
        },
      },
    },
    operations: {
      ...receive,
      send_event: {
        action: 'send',
        channel,
        summary: SERVER_MESSAGES.event,
        messages: [channelMessage('event')],
      },
      send_error: {
        action: 'send',
        channel,
        summary: 'An error outside a reply: a subscription that failed while following',
        messages: [channelMessage('error')],
      },
    },
    components: {
      schemas: payloadSchemas(),
      messages,
      securitySchemes: {
        [BEARER_SCHEME]: {
          type: 'http',
          scheme: 'bearer',
          description: 'the same tokens and scopes as the HTTP API',
        },
      },
    },
  };
}
