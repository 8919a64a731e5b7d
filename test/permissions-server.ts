import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isTerminalStatus, TaskStatus } from '@runledger/contracts';
import { TestPostgres, spawnCli } from '@runledger/testing';
import { OpenApiResponses, ResponseMismatch } from './support/openapi-responses';

export const ADMIN = 'tok-admin-perm-0123456789abcdef';

export interface HttpRecord {
  method: string;
  path: string;
  status: number;
  contentType: string | null;
  text: string;
}

/**
 * `runledger serve` as a real child process over one data folder, so a test can SIGKILL it and
 * start it again on the same SQLite file. Every response body and every log line is kept for
 * scanning.
 */
export class ServerProcess {
  readonly responses: HttpRecord[] = [];
  readonly logs: string[] = [];
  private child: ReturnType<typeof spawnCli>['child'] | null = null;
  url = '';

  private constructor(
    readonly dir: string,
    readonly env: Record<string, string>,
  ) {}

  static create(extraEnv: Record<string, string> = {}): ServerProcess {
    const dir = mkdtempSync(join(tmpdir(), 'rl-perm-e2e-'));
    const workspace = join(dir, 'workspace');
    mkdirSync(workspace);
    return new ServerProcess(dir, {
      PORT: '0',
      HOST: '127.0.0.1',
      RUNLEDGER_DB: join(dir, 'runledger.db'),
      RUNLEDGER_ADMIN_TOKEN: ADMIN,
      RUNLEDGER_ALLOWED_ROOT: workspace,
      RUNLEDGER_SANDBOX: 'process',
      RUNLEDGER_RATE_LIMIT: '0',
      // a test machine shared by parallel suites stalls the event loop; the backpressure specs set their own
      RUNLEDGER_OVERLOAD_LOOP_DELAY_MS: '0',
      RUNLEDGER_OVERLOAD_LOOP_UTILIZATION: '1',
      RUNLEDGER_TASK_START_LOOP_UTILIZATION: '1',
      LOG_LEVEL: 'debug',
      ...extraEnv,
    });
  }

  /** Another server process on the same data folder and database (another instance), with `extraEnv` on top. */
  static beside(other: ServerProcess, extraEnv: Record<string, string> = {}): ServerProcess {
    return new ServerProcess(other.dir, { ...other.env, ...extraEnv });
  }

  /** One server per describe block: started before, killed and removed after. */
  static forSuite(extraEnv: Record<string, string> = {}): () => ServerProcess {
    let server: ServerProcess;
    beforeAll(async () => {
      server = ServerProcess.create(extraEnv);
      await server.start();
    });
    afterAll(async () => {
      await server.dispose();
    });
    return () => server;
  }

  /** the running server's process id (leases name their owner by it) */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  get workspace(): string {
    return this.env.RUNLEDGER_ALLOWED_ROOT;
  }

  async start(): Promise<void> {
    const { child, done } = spawnCli(['serve'], { cwd: this.dir, env: this.env });
    this.child = child;
    let buffered = '';
    const onData = (c: Buffer) => {
      const text = c.toString('utf8');
      this.logs.push(text);
      buffered += text;
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    const deadline = Date.now() + 90_000;
    for (;;) {
      const m = /listening on (http:\/\/\S+)/.exec(buffered);
      if (m) {
        this.url = m[1];
        return;
      }
      if (child.exitCode !== null) throw new Error(`server exited: ${buffered}`);
      if (Date.now() > deadline) throw new Error(`server did not start: ${buffered}`);
      await Promise.race([new Promise((r) => setTimeout(r, 25)), done]);
    }
  }

  /** SIGKILL: no shutdown hook runs, as in a crash. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((r) => child.once('close', r));
    child.kill('SIGKILL');
    await gone;
    this.child = null;
  }

  /** SIGTERM: the shutdown hooks run (the runtime stops, buffers flush, the storage closes), as on a deploy. */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((r) => child.once('close', r));
    child.kill('SIGTERM');
    await gone;
    this.child = null;
  }

  async dispose(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }

  async request(
    method: string,
    path: string,
    body?: unknown,
    token: string = ADMIN,
    headers: Record<string, string> = {},
    // parsed JSON of any route, read field by field by the tests
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
  ): Promise<{ status: number; body: any; text: string }> {
    const res = await fetch(`${this.url}${path}`, {
      method,
      headers: {
        ...headers,
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    this.responses.push({
      method,
      path,
      status: res.status,
      contentType: res.headers.get('content-type'),
      text,
    });
    return { status: res.status, body: parseJson(text), text };
  }

  /** The responses `request` got that the running server's OpenAPI document does not describe. */
  async responseMismatches(): Promise<ResponseMismatch[]> {
    const document = new OpenApiResponses(
      (await (await fetch(`${this.url}/docs/openapi.json`)).json()) as Record<string, unknown>,
    );
    return this.responses.flatMap(({ method, path, status, contentType, text }) => {
      const problem = document.check(method, path, status, contentType, parseJson(text));
      return problem ? [{ request: `${method} ${path.slice(0, 120)}`, status, problem }] : [];
    });
  }

  async waitFor(taskId: string, done: (s: TaskStatus) => boolean = isTerminalStatus, timeoutMs = 20_000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const res = await this.request('GET', `/tasks/${taskId}`);
      if (res.status === 200 && done(res.body.status)) return res.body;
      if (Date.now() > deadline)
        throw new Error(`task ${taskId} still ${res.body?.status} after ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 30));
    }
  }

  async events(taskId: string): Promise<{ type: string; payload: Record<string, unknown> }[]> {
    return (await this.request('GET', `/tasks/${taskId}/events?limit=1000`)).body.events;
  }
}

const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
};

/**
 * Two server instances on a fresh PostgreSQL schema with short leases (renewed every 250 ms, lost
 * 1.5 s after a kill), the second beside the first; `configure` sets up the first before the second
 * copies its environment.
 */
export async function pgServerPair(
  pg: TestPostgres,
  configure: (first: ServerProcess) => void = () => undefined,
): Promise<[ServerProcess, ServerProcess]> {
  const schema = await pg.freshSchema({ migrate: false });
  await schema.handle.close();
  const a = ServerProcess.create({
    RUNLEDGER_DB: schema.url,
    RUNLEDGER_PG_SCHEMA: schema.schema,
    RUNLEDGER_LEASE_RENEW_MS: '250',
    RUNLEDGER_LEASE_TTL_MS: '1500',
    RUNLEDGER_MEMORY: 'off',
    LOG_LEVEL: 'warn',
  });
  a.env.RUNLEDGER_DATA_DIR = join(a.dir, 'data');
  configure(a);
  return [a, ServerProcess.beside(a)];
}
