import { createServer, IncomingMessage, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { Message, Part, Role, Task } from '@a2a-js/sdk';
import {
  Client,
  ClientFactory,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from '@a2a-js/sdk/client';

/** What the A2A e2e suites share: messages, an SDK client with a bearer token, a local receiver of deliveries. */

export const text = (t: string): Part => ({
  content: { $case: 'text', value: t },
  metadata: undefined,
  filename: '',
  mediaType: '',
});
export const data = (v: Record<string, unknown>): Part => ({
  content: { $case: 'data', value: v },
  metadata: undefined,
  filename: '',
  mediaType: '',
});
let messages = 0;
export const message = (parts: Part[], extra: Partial<Message> = {}): Message => ({
  messageId: `msg-${process.pid}-${Date.now()}-${messages++}`,
  contextId: '',
  taskId: '',
  role: Role.ROLE_USER,
  parts,
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
  ...extra,
});
export const send = (m: Message, configuration?: Record<string, unknown>) => ({
  tenant: '',
  message: m,
  configuration: configuration
    ? {
        acceptedOutputModes: [],
        taskPushNotificationConfig: undefined,
        returnImmediately: false,
        ...configuration,
      }
    : undefined,
  metadata: undefined,
});

export const fetchWith =
  (token: string): typeof fetch =>
  (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set('authorization', `Bearer ${token}`);
    return fetch(input, { ...init, headers });
  };

export async function clientOf(
  url: string,
  token: string,
  binding: 'JSONRPC' | 'HTTP+JSON' = 'JSONRPC',
): Promise<Client> {
  const fetchImpl = fetchWith(token);
  return new ClientFactory({
    transports: [new JsonRpcTransportFactory({ fetchImpl }), new RestTransportFactory({ fetchImpl })],
    preferredTransports: [binding],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
  }).createFromUrl(url);
}

export const asTask = (r: Message | Task): Task => {
  if (!('status' in r)) throw new Error('expected a task');
  return r;
};
export const requestOf = (t: Task): Record<string, unknown> => {
  const part = t.status!.message!.parts.find((p) => p.content?.$case === 'data')!;
  return (part.content as { value: Record<string, unknown> }).value;
};

/** A local receiver of deliveries: answers `status()` to each, records what it took (2xx) by update. */
export async function startReceiver(status: () => number = () => 200, delayMs = 0) {
  const taken: { body: string; headers: IncomingMessage['headers'] }[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const code = status();
      if (code >= 200 && code < 300) taken.push({ body, headers: req.headers });
      setTimeout(() => res.writeHead(code).end(), delayMs);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    taken,
    close: () => new Promise((r) => server.close(r)),
  };
}

export const isFinalTask = (body: string): boolean =>
  (JSON.parse(body) as { task?: { status?: { state?: string } } }).task?.status?.state ===
  'TASK_STATE_COMPLETED';
