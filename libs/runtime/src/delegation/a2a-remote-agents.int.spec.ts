import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { AgentProfile } from '@runledger/contracts';
import { A2ARemoteAgents } from './a2a-remote-agents';
import { RemoteCall, remoteContextIdFor, remoteMessageIdFor } from './remote-agents';

/** The A2A client against agents that are not there or speak something else: real sockets, no agent. */

const callTo = (url: string, extra: Partial<AgentProfile['a2a']> = {}): RemoteCall => ({
  call_id: 'c1',
  agent: {
    name: 'far',
    description: '',
    models: {},
    tools: null,
    instructions: '',
    a2a: { url, ...extra },
  },
  message_id: remoteMessageIdFor('task_parent', 'c1'),
  context_id: remoteContextIdFor('task_parent', 'c1'),
  input: 'do it',
});

async function serve(handler: Parameters<typeof createServer>[1]): Promise<{ url: string; server: Server }> {
  const server = createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

describe('A2ARemoteAgents (int)', () => {
  const sut = new A2ARemoteAgents({ attempts: 3, backoffMs: 10, maxBackoffMs: 20 });

  it('an agent that cannot be reached (connection refused) is tried as often as the retry allows, then fails remote_unavailable', async () => {
    const { url, server } = await serve(() => undefined);
    await new Promise((r) => server.close(r));
    const step = await sut.open(callTo(url), new AbortController().signal);
    expect(step).toEqual({
      kind: 'failed',
      stop_reason: 'remote_unavailable',
      error: expect.stringMatching(
        new RegExp(`^remote agent far at ${url} could not be reached after 3 attempts: .*fetch failed`),
      ),
    });
  });

  it('a 503 is retried; a card that offers nothing this client speaks fails at once with remote_unavailable', async () => {
    let requests = 0;
    const { url, server } = await serve((req, res) => {
      requests++;
      if (requests === 1) return res.writeHead(503).end();
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          name: 'odd',
          supportedInterfaces: [{ url: `${url}/grpc`, protocolBinding: 'GRPC', protocolVersion: '1.0' }],
        }),
      );
    });
    try {
      const step = await sut.open(callTo(url), new AbortController().signal);
      expect(step).toMatchObject({ kind: 'failed', stop_reason: 'remote_unavailable' });
      expect(step && step.kind === 'failed' && step.error).toContain(
        'its agent card offers nothing this runtime speaks',
      );
      expect(requests).toBe(2);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it('5xx on every attempt: remote_unavailable after the retries, naming the status', async () => {
    let requests = 0;
    const { url, server } = await serve((_req, res) => {
      requests++;
      res.writeHead(502).end();
    });
    try {
      const step = await sut.open(callTo(url), new AbortController().signal);
      expect(step).toMatchObject({ kind: 'failed', stop_reason: 'remote_unavailable' });
      expect(step && step.kind === 'failed' && step.error).toMatch(
        new RegExp(`^remote agent far at ${url} could not be reached after 3 attempts: .*502`),
      );
      expect(requests).toBe(3);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it('a card that cannot be read (404, not JSON) fails at once with remote_unavailable, saying so', async () => {
    let requests = 0;
    const { url, server } = await serve((req, res) => {
      requests++;
      if (req.url === '/.well-known/agent-card.json') return res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'text/html' }).end('<html>not a card</html>');
    });
    try {
      const missing = await sut.open(callTo(url), new AbortController().signal);
      expect(missing).toMatchObject({ kind: 'failed', stop_reason: 'remote_unavailable' });
      expect(missing && missing.kind === 'failed' && missing.error).toMatch(
        /its agent card could not be read: Failed to fetch Agent Card from .*: 404$/,
      );
      const html = await sut.open(
        callTo(url, { url: undefined, card_url: `${url}/card.html` }),
        new AbortController().signal,
      );
      expect(html).toMatchObject({ kind: 'failed', stop_reason: 'remote_unavailable' });
      expect(html && html.kind === 'failed' && html.error).toContain('its agent card could not be read: ');
      expect(requests).toBe(2);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it('headers_from names a variable that is not set: a clear error, nothing sent', async () => {
    let requests = 0;
    const { url, server } = await serve((_req, res) => {
      requests++;
      res.writeHead(404).end();
    });
    try {
      const step = await sut.open(
        callTo(url, { headers_from: 'env:RL_UNSET_HEADERS_FOR_TEST' }),
        new AbortController().signal,
      );
      expect(step).toMatchObject({ kind: 'failed', stop_reason: 'remote_unavailable' });
      expect(step && step.kind === 'failed' && step.error).toBe(
        `remote agent far at ${url}: headers_from env:RL_UNSET_HEADERS_FOR_TEST: the variable is not set`,
      );
      expect(requests).toBe(0);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it('an aborted delegation stops between attempts', async () => {
    const { url, server } = await serve(() => undefined);
    await new Promise((r) => server.close(r));
    const ctrl = new AbortController();
    ctrl.abort();
    expect(await sut.open(callTo(url), ctrl.signal)).toBeNull();
  });
});
