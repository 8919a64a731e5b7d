import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, IncomingMessage, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { runCli } from '@runledger/testing';
import { bootApi, waitForTask } from './api-harness';
import { ServerProcess } from './permissions-server';

/**
 * OpenTelemetry GenAI traces through the real app: a local OTLP/HTTP receiver (POST /v1/traces,
 * JSON bodies, as @opentelemetry/exporter-trace-otlp-http sends them) gets a finished task's
 * spans from `runledger serve` in a child process (the exporter loads node:http with a dynamic
 * import, which jest's module sandbox refuses, so sending is tested out of it); with no endpoint
 * configured nothing is created or exported.
 */

interface OtlpValue {
  stringValue?: string;
  intValue?: number | string;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: OtlpValue[] };
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes?: { key: string; value: OtlpValue }[];
  status?: { code?: number; message?: string };
}
interface ReceivedSpan extends OtlpSpan {
  service: string | undefined;
  attrs: Record<string, unknown>;
}

const valueOf = (v: OtlpValue): unknown => {
  if (v.arrayValue) return (v.arrayValue.values ?? []).map(valueOf);
  if (v.intValue !== undefined) return Number(v.intValue);
  return v.stringValue ?? v.doubleValue ?? v.boolValue;
};
const attributesOf = (list: { key: string; value: OtlpValue }[] = []) =>
  Object.fromEntries(list.map((a) => [a.key, valueOf(a.value)]));

/** our own OTLP/HTTP receiver: every span of every POST /v1/traces, with its resource's service.name */
async function startReceiver() {
  const spans: ReceivedSpan[] = [];
  const requests: { path: string | undefined; contentType: string | undefined }[] = [];
  const read = async (req: IncomingMessage) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  };
  const server: Server = createServer((req, res) => {
    requests.push({ path: req.url, contentType: req.headers['content-type'] });
    void read(req).then((body) => {
      if (req.method === 'POST' && req.url === '/v1/traces') {
        const payload = JSON.parse(body) as {
          resourceSpans: {
            resource?: { attributes?: { key: string; value: OtlpValue }[] };
            scopeSpans: { spans: OtlpSpan[] }[];
          }[];
        };
        for (const rs of payload.resourceSpans) {
          const service = attributesOf(rs.resource?.attributes)['service.name'] as string | undefined;
          for (const ss of rs.scopeSpans)
            for (const s of ss.spans) spans.push({ ...s, service, attrs: attributesOf(s.attributes) });
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, spans, requests, close: () => new Promise<void>((r) => server.close(() => r())) };
}

async function until(check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`not reached in ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const SPAN_KIND_INTERNAL = 1;
const SPAN_KIND_CLIENT = 3;
const STATUS_ERROR = 2;

describe('OpenTelemetry GenAI traces over OTLP/HTTP', () => {
  let dir: string;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let model: string;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rl-otel-'));
    receiver = await startReceiver();
    // one model call asks for a tool that fails, the second responds
    const script = join(dir, 'script.json');
    writeFileSync(
      script,
      JSON.stringify({
        orchestrator: [
          {
            content: JSON.stringify({ type: 'tool', tool: 'file_read', args: { path: 'missing.txt' } }),
            model: 'model-x-2026',
            usage: { prompt_tokens: 100, completion_tokens: 20 },
          },
          {
            content: JSON.stringify({ type: 'respond', content: 'the file is missing' }),
            model: 'model-x-2026',
            usage: { prompt_tokens: 150, completion_tokens: 10 },
          },
        ],
      }),
    );
    model = `scripted:${script}`;
  });
  afterEach(async () => {
    await receiver.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** a server with the scripted model that exports its traces to the receiver quickly; `env` adds what a test is about */
  const tracedServer = (env: Record<string, string>) =>
    ServerProcess.create({
      RUNLEDGER_MODEL: model,
      RUNLEDGER_MEMORY: 'off',
      RUNLEDGER_TOOL_RETRIES: '0',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: '50',
      ...env,
    });

  it("a finished task's spans arrive: invoke_agent root, chat and execute_tool children, GenAI attributes", async () => {
    const server = tracedServer({ OTEL_SERVICE_NAME: 'runledger-e2e' });
    try {
      await server.start();
      const created = await server.request('POST', '/tasks', {
        input: 'read missing.txt',
        session_id: 'sess-otel',
      });
      expect(created.status).toBe(202);
      const taskId: string = created.body.task_id;
      const task = await server.waitFor(taskId);
      await until(() => receiver.spans.some((s) => s.attrs['gen_ai.operation.name'] === 'invoke_agent'));

      expect(receiver.requests.length).toBeGreaterThan(0);
      for (const r of receiver.requests)
        expect(r).toEqual({ path: '/v1/traces', contentType: 'application/json' });
      const spans = receiver.spans.filter((s) => s.attrs['runledger.task_id'] === taskId);
      const root = spans.find((s) => s.attrs['gen_ai.operation.name'] === 'invoke_agent')!;
      const chats = spans.filter((s) => s.attrs['gen_ai.operation.name'] === 'chat');
      const tools = spans.filter((s) => s.attrs['gen_ai.operation.name'] === 'execute_tool');
      expect(spans).toHaveLength(1 + chats.length + tools.length);

      expect(root).toMatchObject({
        name: 'invoke_agent runledger',
        kind: SPAN_KIND_INTERNAL,
        service: 'runledger-e2e',
      });
      expect(root.parentSpanId ?? '').toBe('');
      expect(root.attrs).toMatchObject({
        'gen_ai.agent.name': 'runledger',
        'gen_ai.conversation.id': 'sess-otel',
        'gen_ai.usage.input_tokens': 250,
        'gen_ai.usage.output_tokens': 30,
        'runledger.stop_reason': task.stop_reason,
        'runledger.session_id': 'sess-otel',
      });

      expect(chats).toHaveLength(2);
      for (const chat of chats) {
        // a scripted backend asks for no model by name: it names itself
        expect(chat).toMatchObject({ name: 'chat scripted', kind: SPAN_KIND_CLIENT });
        expect(chat.attrs).toMatchObject({
          'gen_ai.provider.name': 'scripted',
          'gen_ai.request.model': 'scripted',
          'gen_ai.response.model': 'model-x-2026',
        });
      }
      const byStart = (a: OtlpSpan, b: OtlpSpan) =>
        BigInt(a.startTimeUnixNano) < BigInt(b.startTimeUnixNano) ? -1 : 1;
      const [first, second] = [...chats].sort(byStart);
      expect(
        [first, second].map((c) => [
          c.attrs['gen_ai.usage.input_tokens'],
          c.attrs['gen_ai.usage.output_tokens'],
        ]),
      ).toEqual([
        [100, 20],
        [150, 10],
      ]);

      expect(tools).toHaveLength(1);
      const [tool] = tools;
      expect(tool.name).toBe('execute_tool file_read');
      expect(tool.attrs).toMatchObject({ 'gen_ai.tool.name': 'file_read', 'error.type': expect.any(String) });
      expect(typeof tool.attrs['gen_ai.tool.call.id']).toBe('string');
      expect(tool.status?.code).toBe(STATUS_ERROR);

      // one trace, every child directly under the root and inside its time
      for (const child of [...chats, ...tools]) {
        expect(child.traceId).toBe(root.traceId);
        expect(child.parentSpanId).toBe(root.spanId);
        expect(BigInt(child.startTimeUnixNano)).toBeGreaterThanOrEqual(BigInt(root.startTimeUnixNano));
        expect(BigInt(child.endTimeUnixNano)).toBeLessThanOrEqual(BigInt(root.endTimeUnixNano));
      }
      // the tool ran between the model's two calls
      expect(BigInt(tool.startTimeUnixNano)).toBeGreaterThanOrEqual(BigInt(first.endTimeUnixNano));
      expect(BigInt(tool.endTimeUnixNano)).toBeLessThanOrEqual(BigInt(second.startTimeUnixNano));

      // content is off by default
      const contentKeys = [
        'gen_ai.input.messages',
        'gen_ai.output.messages',
        'gen_ai.tool.call.arguments',
        'gen_ai.tool.call.result',
      ];
      for (const s of spans) for (const key of contentKeys) expect(s.attrs).not.toHaveProperty(key);
    } finally {
      await server.dispose();
    }
  });

  it("runledger run flushes its task's trace on exit, with content when asked to capture it", async () => {
    const res = await runCli(['run', 'read missing.txt', '--model', model, '--json', '--yes'], {
      cwd: dir,
      env: {
        RUNLEDGER_DB: join(dir, 'data', 'runledger.db'),
        RUNLEDGER_MEMORY: 'off',
        RUNLEDGER_TOOL_RETRIES: '0',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces`,
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true',
        // no scheduled export in the life of this process: only the flush on exit can send
        OTEL_BSP_SCHEDULE_DELAY: '600000',
      },
    });
    expect(res.stderr).not.toMatch(/trace/i);
    // --json: one line per event, the summary last
    const taskId: string = JSON.parse(res.stdout.trim().split('\n').pop()!).summary.task_id;
    const spans = receiver.spans.filter((s) => s.attrs['runledger.task_id'] === taskId);
    expect(spans.map((s) => s.attrs['gen_ai.operation.name']).sort()).toEqual([
      'chat',
      'chat',
      'execute_tool',
      'invoke_agent',
    ]);
    const root = spans.find((s) => s.attrs['gen_ai.operation.name'] === 'invoke_agent')!;
    expect(root.service).toBe('runledger');
    expect(JSON.parse(root.attrs['gen_ai.input.messages'] as string)).toEqual([
      { role: 'user', parts: [{ type: 'text', content: 'read missing.txt' }] },
    ]);
    const tool = spans.find((s) => s.attrs['gen_ai.operation.name'] === 'execute_tool')!;
    expect(JSON.parse(tool.attrs['gen_ai.tool.call.arguments'] as string)).toEqual({ path: 'missing.txt' });
  });

  it('OTEL_SDK_DISABLED=true keeps tracing off even with an endpoint: nothing is sent, also on shutdown', async () => {
    const server = tracedServer({ OTEL_SDK_DISABLED: 'true' });
    try {
      await server.start();
      const created = await server.request('POST', '/tasks', { input: 'read missing.txt' });
      await server.waitFor(created.body.task_id);
      // SIGTERM: a tracer, had one been made, would flush its batch now
      await server.stop();
      expect(receiver.requests).toEqual([]);
    } finally {
      await server.dispose();
    }
  });

  it('with no endpoint configured no span is recorded and the exporter is never called', async () => {
    const recorded = jest.spyOn(BatchSpanProcessor.prototype, 'onEnd');
    const exported = jest.spyOn(OTLPTraceExporter.prototype, 'export');
    const run = async (env: Record<string, string>) => {
      const h = await bootApi({
        RUNLEDGER_MODEL: model,
        RUNLEDGER_MEMORY: 'off',
        RUNLEDGER_TOOL_RETRIES: '0',
        ...env,
      });
      try {
        const created = await h.request('POST', '/tasks', { body: { input: 'read missing.txt' } });
        await waitForTask(h, created.body.task_id);
      } finally {
        // closing flushes whatever a tracer would have batched
        await h.close();
      }
    };
    try {
      await run({});
      expect(recorded).not.toHaveBeenCalled();
      expect(exported).not.toHaveBeenCalled();
      // the same run with an endpoint does record and export (here the send itself fails: see above), so the spies see
      await run({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url });
      expect(recorded).toHaveBeenCalledTimes(4);
      expect(exported).toHaveBeenCalled();
    } finally {
      recorded.mockRestore();
      exported.mockRestore();
    }
  });
});
