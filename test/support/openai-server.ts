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
  /**
   * reasoning sent before the content: streamed as `delta.reasoning_content` pieces, whole as
   * `message.reasoning_content`; on /v1/responses a reasoning item's summary (streamed as
   * `response.reasoning_summary_text.delta` pieces)
   */
  reasoning?: string;
  /** native tool calls of the reply (finish_reason tool_calls); streamed as deltas: id and name, then the arguments in pieces of 5 characters */
  tool_calls?: { id?: string; name: string; arguments: string }[];
  /** the reply's finish_reason; tool_calls when it has calls, else stop, when absent */
  finish_reason?: 'stop' | 'length' | 'tool_calls' | 'content_filter';
  /** streaming: after the content, an error sent inside the stream (`data: {"error": {...}}`) instead of the end */
  stream_error?: { message: string; code?: string; type?: string; status?: number };
  /** /v1/responses: false answers without keeping the response, as if it expired at once: continuing it is refused */
  stored?: boolean;
}

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: Record<string, unknown>;
  /** /v1/responses: the whole conversation the server answered, the stored one it continued included */
  conversation?: unknown[];
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
  /** /v1/responses: the stored responses are gone (expired, another server): a request continuing one is refused */
  forgetResponses(): void;
  close(): Promise<void>;
}

export interface FakeServerOptions {
  /** bearer key the server requires; any key when absent */
  apiKey?: string;
  embeddingDim?: number;
  /** /v1/responses: false stores nothing (a server without conversation state), so every previous_response_id is refused */
  storeResponses?: boolean;
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
              ...(reply.reasoning ? { reasoning_content: reply.reasoning } : {}),
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
  for (const piece of reply.reasoning?.match(/[\s\S]{1,8}/g) ?? [])
    send([{ index: 0, delta: { reasoning_content: piece }, finish_reason: null }]);
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

type Item = Record<string, unknown>;

/** The input of a responses request as items (a bare string is one user message). */
const inputItems = (input: unknown): Item[] =>
  typeof input === 'string'
    ? [{ type: 'message', role: 'user', content: input }]
    : Array.isArray(input)
      ? (input as Item[])
      : [];

let responseCounter = 0;

/** A reply as the output of a response, and as the items a later request would send for it. */
function responseOutput(reply: FakeReply): { output: Item[]; asInput: Item[] } {
  const content = reply.content ?? '';
  const calls = reply.tool_calls ?? [];
  const output: Item[] = [];
  const asInput: Item[] = [];
  if (reply.reasoning)
    output.push({
      type: 'reasoning',
      id: `rs_${++responseCounter}`,
      summary: [{ type: 'summary_text', text: reply.reasoning }],
    });
  if (content || calls.length === 0) {
    output.push({
      type: 'message',
      id: `msg_${++responseCounter}`,
      role: 'assistant',
      status: 'completed',
      content: [{ type: 'output_text', text: content, annotations: [] }],
    });
    if (content) asInput.push({ type: 'message', role: 'assistant', content });
  }
  for (const [i, c] of calls.entries()) {
    const call_id = c.id ?? `call_${i}`;
    output.push({
      type: 'function_call',
      id: `fc_${++responseCounter}`,
      call_id,
      name: c.name,
      arguments: c.arguments,
      status: 'completed',
    });
    asInput.push({ type: 'function_call', call_id, name: c.name, arguments: c.arguments });
  }
  return { output, asInput };
}

async function sendResponse(
  res: ServerResponse,
  body: Record<string, unknown>,
  reply: FakeReply,
  id: string,
  output: Item[],
  closing: { closed: boolean },
): Promise<void> {
  const model = reply.model ?? String(body.model ?? 'fake-model');
  const usage =
    reply.usage === null
      ? null
      : {
          input_tokens: reply.usage?.prompt_tokens ?? 10,
          output_tokens: reply.usage?.completion_tokens ?? 5,
          total_tokens: (reply.usage?.prompt_tokens ?? 10) + (reply.usage?.completion_tokens ?? 5),
          input_tokens_details: { cached_tokens: 0 },
          output_tokens_details: { reasoning_tokens: 0 },
        };
  const response = (status: string, out: Item[]) => ({
    id,
    object: 'response',
    created_at: Math.floor(Date.now() / 1000),
    status,
    model,
    output: out,
    error: null,
    incomplete_details: null,
    instructions: body.instructions ?? null,
    previous_response_id: body.previous_response_id ?? null,
    store: body.store !== false,
    tools: body.tools ?? [],
    tool_choice: body.tool_choice ?? 'auto',
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    usage: status === 'completed' ? usage : null,
  });
  if (!body.stream) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(response('completed', output)));
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  let sequence_number = 0;
  const send = (type: string, data: object) =>
    res.write(
      `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence_number++, ...data })}\n\n`,
    );
  send('response.created', { response: response('in_progress', []) });
  for (const [output_index, item] of output.entries()) {
    if (closing.closed) return;
    if (item.type === 'message') {
      const text = (item.content as { text: string }[])[0].text;
      send('response.output_item.added', {
        output_index,
        item: { ...item, status: 'in_progress', content: [] },
      });
      const chunks = reply.chunks ?? text.match(/[\s\S]{1,8}/g) ?? [];
      for (const [i, delta] of chunks.entries()) {
        if (closing.closed) return;
        send('response.output_text.delta', { item_id: item.id, output_index, content_index: 0, delta });
        if (i === 0 && reply.stall_ms) await sleep(reply.stall_ms);
      }
      send('response.output_text.done', { item_id: item.id, output_index, content_index: 0, text });
    } else if (item.type === 'reasoning') {
      const text = (item.summary as { text: string }[])[0].text;
      send('response.output_item.added', { output_index, item: { ...item, summary: [] } });
      for (const delta of text.match(/[\s\S]{1,8}/g) ?? [])
        send('response.reasoning_summary_text.delta', {
          item_id: item.id,
          output_index,
          summary_index: 0,
          delta,
        });
      send('response.reasoning_summary_text.done', {
        item_id: item.id,
        output_index,
        summary_index: 0,
        text,
      });
    } else {
      send('response.output_item.added', {
        output_index,
        item: { ...item, arguments: '', status: 'in_progress' },
      });
      for (const delta of String(item.arguments).match(/[\s\S]{1,5}/g) ?? [])
        send('response.function_call_arguments.delta', { item_id: item.id, output_index, delta });
      send('response.function_call_arguments.done', {
        item_id: item.id,
        output_index,
        arguments: item.arguments,
      });
    }
    send('response.output_item.done', { output_index, item });
  }
  if (closing.closed) return;
  if (reply.stream_error) {
    send('error', {
      code: reply.stream_error.code ?? null,
      message: reply.stream_error.message,
      param: null,
    });
    res.end();
    return;
  }
  send('response.completed', { response: response('completed', output) });
  res.end();
}

/**
 * A local OpenAI-compatible server for tests: /v1/chat/completions and
 * /v1/responses (plain and streamed; responses stored by id and continued with
 * previous_response_id, an unknown id refused as OpenAI refuses it) and
 * /v1/embeddings, answering from one queue of scripted replies (content, 429
 * with Retry-After, 500, 401, slow or stalled answers).
 */
export async function startFakeOpenAiServer(options: FakeServerOptions = {}): Promise<FakeOpenAiServer> {
  const queue: FakeReply[] = [];
  let fallback: FakeReply = { content: '{"type":"respond","content":"ok"}' };
  let route: ((body: Record<string, unknown>) => FakeReply | undefined) | null = null;
  const requests: RecordedRequest[] = [];
  const closing = { closed: false };
  /** /v1/responses: each stored response's whole conversation, its own output included */
  const stored = new Map<string, Item[]>();
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
      const api =
        req.method !== 'POST'
          ? null
          : path === '/v1/chat/completions'
            ? 'chat'
            : path === '/v1/responses'
              ? 'responses'
              : null;
      if (!api) return sendError(res, { status: 404, message: `no route ${req.method} ${path}` });
      let conversation: Item[] = [];
      if (api === 'responses') {
        const previous = body.previous_response_id;
        const earlier = typeof previous === 'string' ? stored.get(previous) : [];
        if (!earlier) {
          res.writeHead(400, { 'content-type': 'application/json' });
          res.end(
            JSON.stringify({
              error: {
                message: `Previous response with id '${String(previous)}' not found.`,
                type: 'invalid_request_error',
                param: 'previous_response_id',
                code: 'previous_response_not_found',
              },
            }),
          );
          return;
        }
        conversation = [...earlier, ...inputItems(body.input)];
        requests[requests.length - 1].conversation = conversation;
      }
      const reply = route?.(body) ?? queue.shift() ?? fallback;
      if (reply.delay_ms) await sleep(reply.delay_ms);
      if (closing.closed || res.destroyed) return;
      if (reply.status && reply.status >= 300) return sendError(res, reply);
      if (api === 'chat') return await sendChat(res, body, reply, closing);
      const id = `resp_${++responseCounter}`;
      const { output, asInput } = responseOutput(reply);
      if (body.store !== false && options.storeResponses !== false && reply.stored !== false)
        stored.set(id, [...conversation, ...asInput]);
      await sendResponse(res, body, reply, id, output, closing);
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
    forgetResponses: () => stored.clear(),
    close: async () => {
      closing.closed = true;
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
