import { createHash } from 'node:crypto';
import { IncomingMessage, Server, ServerResponse, createServer } from 'node:http';
import { AddressInfo } from 'node:net';

/** One scripted answer of the fake server. */
export interface FakeReply {
  /** HTTP status; 200 when absent. A non-2xx status answers with an OpenAI-style error body. */
  status?: number;
  /** for errors: the Retry-After header value (seconds) */
  retry_after?: string;
  /** error message for non-2xx replies */
  message?: string;
  /** the assistant content of a 200 reply */
  content?: string;
  /** streamed content pieces (default: the content in pieces of 8 characters) */
  chunks?: string[];
  usage?: { prompt_tokens: number; completion_tokens: number } | null;
  /** wait before answering at all */
  delay_ms?: number;
  /** streaming: wait this long after the first chunk (a stalled stream) */
  stall_ms?: number;
  model?: string;
  /** native tool calls of the reply (finish_reason tool_calls); streamed as deltas: id and name, then the arguments in pieces of 5 characters */
  tool_calls?: { id?: string; name: string; arguments: string }[];
  /** the reply's finish_reason; tool_calls when it has calls, else stop, when absent */
  finish_reason?: 'stop' | 'length' | 'tool_calls' | 'content_filter';
  /** streaming: after the content, an error sent inside the stream (`data: {"error": {...}}`) instead of the end */
  stream_error?: { message: string; code?: string; type?: string; status?: number };
}

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: Record<string, unknown>;
}

export interface FakeOpenAiServer {
  /** base URL for the openai client, ending in /v1 */
  baseURL: string;
  requests: RecordedRequest[];
  /** replies for the next chat completion requests, in order; the default answers when none is queued */
  enqueue(...replies: FakeReply[]): void;
  setDefault(reply: FakeReply): void;
  /**
   * Answer by the request instead of by arrival order (concurrent callers, such as the child tasks
   * of one plan): `route` is asked first; undefined falls through to the queue and the default.
   */
  setRoute(route: ((body: Record<string, unknown>) => FakeReply | undefined) | null): void;
  close(): Promise<void>;
}

export interface FakeServerOptions {
  /** bearer key the server requires; any key when absent */
  apiKey?: string;
  embeddingDim?: number;
}

const readBody = (req: IncomingMessage): Promise<Record<string, unknown>> =>
  new Promise((resolve, reject) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString('utf8')));
    req.on('end', () => {
      try {
        resolve(raw ? (JSON.parse(raw) as Record<string, unknown>) : {});
      } catch (e) {
        reject(e);
      }
    });
    req.on('error', reject);
  });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms).unref());

/** A deterministic unit vector from the text, so equal texts embed equally and similar prefixes do not. */
export function fakeEmbedding(text: string, dim: number): number[] {
  const out: number[] = [];
  let block = createHash('sha256').update(text).digest();
  while (out.length < dim) {
    for (const b of block) if (out.length < dim) out.push(b / 255 - 0.5);
    block = createHash('sha256').update(block).digest();
  }
  const norm = Math.sqrt(out.reduce((n, x) => n + x * x, 0)) || 1;
  return out.map((x) => x / norm);
}

function sendError(res: ServerResponse, reply: FakeReply): void {
  const status = reply.status!;
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (reply.retry_after !== undefined) headers['retry-after'] = reply.retry_after;
  res.writeHead(status, headers);
  const type =
    status === 401 ? 'invalid_request_error' : status === 429 ? 'rate_limit_exceeded' : 'server_error';
  res.end(
    JSON.stringify({
      error: { message: reply.message ?? `fake error ${status}`, type, code: null, param: null },
    }),
  );
}

async function sendChat(
  res: ServerResponse,
  body: Record<string, unknown>,
  reply: FakeReply,
  closing: { closed: boolean },
): Promise<void> {
  const model = reply.model ?? String(body.model ?? 'fake-model');
  const content = reply.content ?? '';
  const usage =
    reply.usage === null
      ? undefined
      : {
          prompt_tokens: reply.usage?.prompt_tokens ?? 10,
          completion_tokens: reply.usage?.completion_tokens ?? 5,
        };
  const usageBody = usage && { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens };
  const id = `chatcmpl-${Date.now()}`;
  const created = Math.floor(Date.now() / 1000);
  const calls = reply.tool_calls ?? [];
  const finish_reason = reply.finish_reason ?? (calls.length > 0 ? 'tool_calls' : 'stop');
  if (!body.stream) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        id,
        object: 'chat.completion',
        created,
        model,
        choices: [
          {
            index: 0,
            message: {
              role: 'assistant',
              content: calls.length > 0 && !content ? null : content,
              ...(calls.length > 0
                ? {
                    tool_calls: calls.map((c) => ({
                      id: c.id,
                      type: 'function',
                      function: { name: c.name, arguments: c.arguments },
                    })),
                  }
                : {}),
            },
            finish_reason,
            logprobs: null,
          },
        ],
        usage: usageBody,
      }),
    );
    return;
  }
  res.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
  });
  const chunks = reply.chunks ?? content.match(/[\s\S]{1,8}/g) ?? [];
  const send = (choices: unknown[], extra: object = {}) =>
    res.write(
      `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices, ...extra })}\n\n`,
    );
  for (let i = 0; i < chunks.length; i++) {
    if (closing.closed) return;
    const delta = i === 0 ? { role: 'assistant', content: chunks[i] } : { content: chunks[i] };
    send([{ index: 0, delta, finish_reason: null }]);
    if (i === 0 && reply.stall_ms) await sleep(reply.stall_ms);
  }
  for (const [index, c] of calls.entries()) {
    send([
      {
        index: 0,
        delta: {
          tool_calls: [{ index, id: c.id, type: 'function', function: { name: c.name, arguments: '' } }],
        },
        finish_reason: null,
      },
    ]);
    for (const piece of c.arguments.match(/[\s\S]{1,5}/g) ?? [])
      send([
        { index: 0, delta: { tool_calls: [{ index, function: { arguments: piece } }] }, finish_reason: null },
      ]);
  }
  if (closing.closed) return;
  if (reply.stream_error) {
    res.end(`data: ${JSON.stringify({ error: reply.stream_error })}\n\n`);
    return;
  }
  send([{ index: 0, delta: {}, finish_reason }]);
  if (usageBody) send([], { usage: usageBody });
  res.end('data: [DONE]\n\n');
}

/**
 * A local OpenAI-compatible server for tests: /v1/chat/completions (plain and
 * streamed) and /v1/embeddings, answering from a queue of scripted replies
 * (content, 429 with Retry-After, 500, 401, slow or stalled answers).
 */
export async function startFakeOpenAiServer(options: FakeServerOptions = {}): Promise<FakeOpenAiServer> {
  const queue: FakeReply[] = [];
  let fallback: FakeReply = { content: '{"type":"respond","content":"ok"}' };
  let route: ((body: Record<string, unknown>) => FakeReply | undefined) | null = null;
  const requests: RecordedRequest[] = [];
  const closing = { closed: false };
  const server: Server = createServer((req, res) => {
    void (async () => {
      const body = await readBody(req).catch(() => null);
      if (body === null) return sendError(res, { status: 400, message: 'body is not JSON' });
      const path = (req.url ?? '').split('?')[0];
      requests.push({ method: req.method ?? '', path, headers: req.headers, body });
      if (options.apiKey && req.headers.authorization !== `Bearer ${options.apiKey}`)
        return sendError(res, { status: 401, message: 'Incorrect API key provided' });
      if (req.method === 'POST' && path === '/v1/embeddings') {
        const input = Array.isArray(body.input) ? (body.input as string[]) : [String(body.input ?? '')];
        const dim = Number(body.dimensions ?? options.embeddingDim ?? 64);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            object: 'list',
            model: body.model ?? 'fake-embed',
            data: input.map((t, index) => ({ object: 'embedding', index, embedding: fakeEmbedding(t, dim) })),
            usage: { prompt_tokens: input.join(' ').length, total_tokens: input.join(' ').length },
          }),
        );
        return;
      }
      if (req.method !== 'POST' || path !== '/v1/chat/completions')
        return sendError(res, { status: 404, message: `no route ${req.method} ${path}` });
      const reply = route?.(body) ?? queue.shift() ?? fallback;
      if (reply.delay_ms) await sleep(reply.delay_ms);
      if (closing.closed || res.destroyed) return;
      if (reply.status && reply.status >= 300) return sendError(res, reply);
      await sendChat(res, body, reply, closing);
    })().catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    enqueue: (...replies) => queue.push(...replies),
    setDefault: (reply) => (fallback = reply),
    setRoute: (r) => (route = r),
    close: async () => {
      closing.closed = true;
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
