import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Browser, Page, chromium } from 'playwright-core';
import WebSocket from 'ws';
import { Abstract, Type } from '@nestjs/common';
import { NestExpressApplication } from '@nestjs/platform-express';
import { Test } from '@nestjs/testing';
import { isTerminalStatus, TaskStatus } from '@runledger/contracts';
// the e2e harness boots the app itself (the rule keeps libs from importing apps/)
// eslint-disable-next-line no-restricted-imports
import { loadConfig } from '../apps/controller/src/config';
// eslint-disable-next-line no-restricted-imports
import { AppFactory, startApp } from '../apps/controller/src/app';
import { OpenApiResponses, ResponseMismatch } from './support/openapi-responses';

/** A provider token of the composition and the value that stands in for it. */
export type ProviderOverride = [token: string | symbol | Type<unknown> | Abstract<unknown>, value: unknown];

/** The app built by Nest's testing module: the same modules, with the given providers overridden. */
function overridingFactory(overrides: ProviderOverride[]): AppFactory {
  return async (root, options) => {
    let builder = Test.createTestingModule({ imports: [root] });
    for (const [token, value] of overrides) builder = builder.overrideProvider(token).useValue(value);
    const moduleRef = await builder.compile();
    return moduleRef.createNestApplication<NestExpressApplication>(options);
  };
}

/** Tokens of a test server: one per scope set. */
export const TOKENS = {
  admin: 'tok-admin-0123456789abcdef0123',
  reader: 'tok-reader-0123456789abcdef012',
  writer: 'tok-writer-0123456789abcdef012',
  approver: 'tok-approver-0123456789abcdef0',
} as const;

export interface HttpResult {
  status: number;
  headers: Headers;
  text: string;
  // parsed JSON body, or null when the body is not JSON
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

export interface ApiHarness {
  /** the Nest application, to reach a provider the HTTP API does not show */
  app: NestExpressApplication;
  url: string;
  wsUrl: string;
  dir: string;
  workspace: string;
  logs: string[];
  /**
   * With `checkResponses`, each response `request` got that the OpenAPI
   * document (/docs/openapi.json) does not describe: an undocumented status,
   * or a JSON body its schema refuses.
   */
  responseMismatches: ResponseMismatch[];
  /**
   * With `checkResponses`: every response of this server that `page` receives
   * (the dashboard's own calls) is checked too; `checkedMismatches` waits for
   * the checks of the bodies still being read.
   */
  watch(page: Page): void;
  checkedMismatches(): Promise<ResponseMismatch[]>;
  request(
    method: string,
    path: string,
    options?: {
      token?: string | null;
      body?: unknown;
      raw?: string | Buffer;
      headers?: Record<string, string>;
    },
  ): Promise<HttpResult>;
  close(): Promise<void>;
}

/** The settings of an orchestrator on a local OpenAI-compatible server, critic and memory off. */
export const openAiOrchestratorEnv = (baseURL: string): Record<string, string> => ({
  RUNLEDGER_MODEL: 'openai',
  OPENAI_BASE_URL: baseURL,
  OPENAI_API_KEY: 'test-key',
  RUNLEDGER_MODEL_ORCHESTRATOR: 'model-a',
  RUNLEDGER_CRITIC: 'off',
  RUNLEDGER_MEMORY: 'off',
});

/** Boot the real controller in-process on 127.0.0.1:0 with a temp DB and captured JSON logs. */
export async function bootApi(
  env: Record<string, string> = {},
  options: {
    beforeBoot?: (dbPath: string) => Promise<void>;
    /** providers of the composition swapped for test doubles, e.g. [ModelBackend, new ScriptedBackend(...)] */
    overrides?: ProviderOverride[];
    /** check every response of `request` against the server's OpenAPI document (see responseMismatches) */
    checkResponses?: boolean;
  } = {},
): Promise<ApiHarness> {
  const dir = mkdtempSync(join(tmpdir(), 'rl-api-'));
  const workspace = join(dir, 'workspace');
  mkdirSync(workspace);
  const tokensFile = join(dir, 'tokens.json');
  writeFileSync(
    tokensFile,
    JSON.stringify([
      { name: 'reader', token: TOKENS.reader, scopes: ['tasks:read'] },
      { name: 'writer', token: TOKENS.writer, scopes: ['tasks:read', 'tasks:write'] },
      { name: 'approver', token: TOKENS.approver, scopes: ['approvals'] },
    ]),
  );
  const config = loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    RUNLEDGER_DB: join(dir, 'runledger.db'),
    RUNLEDGER_ADMIN_TOKEN: TOKENS.admin,
    RUNLEDGER_TOKENS_FILE: tokensFile,
    RUNLEDGER_ALLOWED_ROOT: workspace,
    RUNLEDGER_SQLITE_SYNCHRONOUS: 'NORMAL',
    RUNLEDGER_RATE_LIMIT: '0',
    // a test machine shared by parallel suites stalls the event loop; the backpressure specs set their own
    RUNLEDGER_OVERLOAD_LOOP_DELAY_MS: '0',
    RUNLEDGER_OVERLOAD_LOOP_UTILIZATION: '1',
    RUNLEDGER_TASK_START_LOOP_UTILIZATION: '1',
    RUNLEDGER_SANDBOX: 'process',
    LOG_LEVEL: 'info',
    ...env,
  });
  await options.beforeBoot?.(config.RUNLEDGER_DB);
  const logs: string[] = [];
  const started = await startApp(config, {
    logDestination: { write: (line: string) => void logs.push(line) },
    createApp: options.overrides ? overridingFactory(options.overrides) : undefined,
  });
  const url = started.url;
  const responseMismatches: ResponseMismatch[] = [];
  const document = options.checkResponses
    ? new OpenApiResponses(
        (await (await fetch(`${url}/docs/openapi.json`)).json()) as Record<string, unknown>,
      )
    : null;
  const check = (method: string, path: string, status: number, contentType: string | null, body: unknown) => {
    const problem = document?.check(method, path, status, contentType, body);
    if (problem) responseMismatches.push({ request: `${method} ${path.slice(0, 120)}`, status, problem });
  };
  const reading = new Set<Promise<void>>();
  return {
    app: started.app,
    url,
    wsUrl: `${url.replace(/^http/, 'ws')}/ws`,
    dir,
    workspace,
    logs,
    responseMismatches,
    watch(page) {
      if (!document) throw new Error('watch(page) checks responses: boot with checkResponses');
      page.on('response', (res) => {
        const at = new URL(res.url());
        if (at.origin !== new URL(url).origin) return;
        const contentType = res.headers()['content-type'] ?? null;
        // a body the browser no longer holds (the page moved on) cannot be checked, nor wrongly refused
        const read = (contentType?.includes('application/json') ? res.json() : Promise.resolve(null)).then(
          (body) => check(res.request().method(), at.pathname + at.search, res.status(), contentType, body),
          () => undefined,
        );
        reading.add(read);
        void read.finally(() => reading.delete(read));
      });
    },
    async checkedMismatches() {
      await Promise.all(reading);
      return responseMismatches;
    },
    async request(method, path, options = {}) {
      const token = options.token === undefined ? TOKENS.admin : options.token;
      const headers: Record<string, string> = { ...options.headers };
      if (token) headers.authorization = `Bearer ${token}`;
      let body: string | Buffer | undefined;
      if (options.raw !== undefined) body = options.raw;
      else if (options.body !== undefined) body = JSON.stringify(options.body);
      if (body !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type'))
        headers['content-type'] = 'application/json';
      const res = await fetch(`${url}${path}`, {
        method,
        headers,
        body: typeof body === 'string' || body === undefined ? body : new Uint8Array(body),
      });
      const text = await res.text();
      let parsed: unknown = null;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = null;
      }
      check(method, path, res.status, res.headers.get('content-type'), parsed);
      return { status: res.status, headers: res.headers, text, body: parsed };
    },
    async close() {
      await started.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Poll the task until `done(status)` (default: terminal). */
export async function waitForTask(
  h: ApiHarness,
  taskId: string,
  done: (s: TaskStatus) => boolean = isTerminalStatus,
  timeoutMs = 15_000,
) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await h.request('GET', `/tasks/${taskId}`);
    if (res.status === 200 && done(res.body.status)) return res.body;
    if (Date.now() > deadline)
      throw new Error(`task ${taskId} still ${res.body?.status} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export async function eventCount(h: ApiHarness): Promise<number> {
  const res = await h.request('GET', '/admin/events?limit=1');
  return res.body.head_position;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type WsMessage = any;

/** A real `ws` client that records every message, for waiting on them in order. */
export class WsClient {
  readonly messages: WsMessage[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;
  private waiters: Array<() => void> = [];

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      this.messages.push(JSON.parse(data.toString()));
      this.waiters.splice(0).forEach((w) => w());
    });
    this.closed = new Promise((resolve) =>
      ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
    );
  }

  static open(url: string, options: WebSocket.ClientOptions = {}): Promise<WsClient> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, options);
      const client = new WsClient(ws);
      ws.once('open', () => resolve(client));
      ws.once('error', reject);
    });
  }

  static async authed(url: string, token: string): Promise<WsClient> {
    const c = await WsClient.open(url);
    c.send({ type: 'auth', token });
    await c.waitFor((m) => m.type === 'authenticated');
    return c;
  }

  send(message: unknown): void {
    this.ws.send(typeof message === 'string' ? message : JSON.stringify(message));
  }

  /** first message (from index `from`) matching `pred` */
  async waitFor(pred: (m: WsMessage) => boolean, timeoutMs = 10_000, from = 0): Promise<WsMessage> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.messages.slice(from).find(pred);
      if (found) return found;
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(
          `no matching ws message in ${timeoutMs} ms; last: ${JSON.stringify(this.messages.slice(-3)).slice(0, 500)}`,
        );
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  events(subscriptionId: string) {
    return this.messages
      .filter((m) => m.type === 'event' && m.subscription_id === subscriptionId)
      .map((m) => m.event);
  }

  close(): void {
    this.ws.close();
  }
}

/** Headless Debian Chromium driven by playwright-core (CHROMIUM_PATH overrides /usr/bin/chromium). */
export async function launchChromium(): Promise<Browser> {
  const executablePath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
  if (!existsSync(executablePath))
    throw new Error(`${executablePath} is missing: apt-get install -y chromium (or set CHROMIUM_PATH)`);
  return chromium.launch({
    executablePath,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
}

/** The SSE body up to the first event naming `marker` (the stream stays open for live events). */
export async function readUntil(res: Response, marker: string): Promise<string> {
  const reader = res.body!.getReader();
  let text = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += Buffer.from(value).toString();
    if (text.includes(marker)) break;
  }
  await reader.cancel();
  return text;
}

/** The messages of a server-sent-events body, comments left out: each one's fields as sent. */
export function parseSse(text: string): { id: string; event: string; data: string }[] {
  return text
    .split('\n\n')
    .filter((block) => block.trim() && !block.startsWith(':'))
    .map((block) => {
      const fields = Object.fromEntries(
        block
          .split('\n')
          .map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 2)]),
      );
      return { id: fields.id, event: fields.event, data: fields.data };
    });
}
