import { createHash } from 'node:crypto';
import { existsSync, realpathSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import Ajv, { type ValidateFunction } from 'ajv';
import type {
  Client,
  ElicitResult,
  Tool as McpToolDescription,
  Transport,
} from '@modelcontextprotocol/client';
import type { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { ToolManifest, mcpToolName } from '@runledger/contracts';
import type { ToolLogger, ToolOutcome } from '../discovery';
import { findOnPath, type ToolSandbox } from '../sandbox';
import type { ToolExecutionContext } from '../tool-registry';
import { ElicitationAnswer, ToolInputRequired, checkElicitationContent, secretFieldOf } from './elicitation';
import { McpServerConfig, isStdioServer } from './mcp-config';
import { McpBlobStore, McpCallResult, toToolOutcome } from './mcp-results';

/**
 * The MCP client SDK, required on the first connection: a process configured without MCP servers
 * (most CLI commands) does not load it.
 */
const clientSdk = () => ({
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  ...(require('@modelcontextprotocol/client') as typeof import('@modelcontextprotocol/client')),
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  ...(require('@modelcontextprotocol/client/stdio') as typeof import('@modelcontextprotocol/client/stdio')),
});

export type McpServerState = 'starting' | 'ready' | 'restarting' | 'failed' | 'stopped';

/** One configured server as /health, the CLI and the tests see it. */
export interface McpServerStatus {
  name: string;
  transport: 'stdio' | 'http';
  state: McpServerState;
  /** the registry names of its tools (none unless ready) */
  tools: string[];
  /** why it is not ready, the last failure */
  error: string | null;
  /** times it was started again after it died or failed */
  restarts: number;
  /** the child process (stdio), null otherwise or while it is down */
  pid: number | null;
  /** the protocol revision spoken with it (2026-07-28 or 2025-11-25), null while it is not connected */
  protocol_version: string | null;
  /** how long its tool list is fresh (its `ttlMs`; re-listed then), null when it gave none */
  tools_ttl_ms: number | null;
}

/** A tool of a server as the registry holds it. */
export interface McpToolEntry {
  manifest: ToolManifest;
  /** the server's own name for it */
  remoteName: string;
  validate: ValidateFunction | null;
}

export interface McpConnectionDeps {
  sandbox: ToolSandbox;
  blobs: McpBlobStore;
  /** the service's environment as read at boot: env_from and headers_from are looked up here */
  env: NodeJS.ProcessEnv;
  logger: ToolLogger;
  /** called after the server's tool list changed (connected, re-listed, or gone) */
  onToolsChanged: () => void;
  /** never visible to a stdio server, even inside a folder its arguments name (the service's data folder) */
  privateFolders?: readonly string[];
  /** first restart delay; doubled per failure up to maxBackoffMs */
  backoffMs?: number;
  maxBackoffMs?: number;
  /** how long a start (spawn or connect, initialize, tools/list) may take */
  startTimeoutMs?: number;
}

/** A call in flight, to which a question from the server belongs. */
interface ActiveCall {
  asked: number;
  answer: ToolExecutionContext['elicitationAnswer'];
  inputRequired: (e: ToolInputRequired) => void;
}

const VERSION = '1.0.0';
/** A connection that stayed up this long was healthy: the next failure starts the backoff again. */
const STABLE_AFTER_MS = 10_000;
const MAX_NAME = 64;
/** a list given a shorter ttlMs is still not asked for more often than this */
const MIN_RELIST_MS = 250;
/** characters of a child's stderr kept to explain why it stopped */
const STDERR_TAIL = 1000;

/**
 * The registry's name of a server's tool: `mcp__<server>__<tool>` with characters a model's function
 * name cannot hold replaced; a name too long is cut and given a hash of the whole so two stay apart.
 */
export function registryToolName(server: string, tool: string): string {
  const name = mcpToolName(server, tool.replace(/[^A-Za-z0-9_-]/g, '_'));
  if (name.length <= MAX_NAME) return name;
  const hash = createHash('sha256').update(tool).digest('hex').slice(0, 8);
  return `${name.slice(0, MAX_NAME - 9)}_${hash}`;
}

/**
 * One MCP server: started (a child process, or a Streamable HTTP session), its tools listed again
 * on tools/list_changed, restarted with backoff when it dies or fails to start. A server that is
 * not ready has no tools; a call to it then fails as a tool error.
 */
export class McpServerConnection {
  private client: Client | null = null;
  private transport: Transport | null = null;
  private entries = new Map<string, McpToolEntry>();
  private readonly active = new Set<ActiveCall>();
  private state: McpServerState = 'starting';
  private error: string | null = null;
  private restarts = 0;
  private failures = 0;
  private connectedAt = 0;
  private timer: NodeJS.Timeout | null = null;
  /** re-lists the tools when the list the server gave goes stale (its ttlMs) */
  private relist: NodeJS.Timeout | null = null;
  private toolsTtlMs: number | null = null;
  private stderrTail = '';
  private readonly ajv = new Ajv({ allErrors: true, strict: false, validateFormats: false });

  constructor(
    readonly config: McpServerConfig,
    private readonly deps: McpConnectionDeps,
  ) {}

  status(): McpServerStatus {
    return {
      name: this.config.name,
      transport: isStdioServer(this.config) ? 'stdio' : 'http',
      state: this.state,
      tools: [...this.entries.keys()],
      error: this.error,
      restarts: this.restarts,
      pid: this.transport && isStdioServer(this.config) ? (this.transport as StdioClientTransport).pid : null,
      protocol_version: this.state === 'ready' ? (this.client?.getNegotiatedProtocolVersion() ?? null) : null,
      tools_ttl_ms: this.toolsTtlMs,
    };
  }

  tools(): McpToolEntry[] {
    return [...this.entries.values()];
  }

  /** The first start; a failure leaves the server `failed`, retried with backoff, and never throws. */
  async start(): Promise<void> {
    await this.connect();
  }

  async close(): Promise<void> {
    this.state = 'stopped';
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.stopRelisting();
    const client = this.client;
    this.client = null;
    this.transport = null;
    this.entries.clear();
    await client?.close().catch(() => undefined);
  }

  async call(
    entry: McpToolEntry,
    args: Record<string, unknown>,
    ctx: ToolExecutionContext,
  ): Promise<ToolOutcome> {
    const client = this.client;
    if (!client || this.state !== 'ready')
      throw new Error(
        `MCP server ${this.config.name} is not connected (${this.state}${this.error ? `: ${this.error}` : ''})`,
      );
    const stop = new AbortController();
    const onAbort = () => stop.abort(ctx.signal.reason);
    ctx.signal.addEventListener('abort', onAbort, { once: true });
    let inputRequired!: (e: ToolInputRequired) => void;
    const needsInput = new Promise<never>((_, reject) => (inputRequired = reject));
    const call: ActiveCall = { asked: 0, answer: ctx.elicitationAnswer, inputRequired };
    this.active.add(call);
    try {
      const request = client.callTool(
        { name: entry.remoteName, arguments: args },
        {
          signal: stop.signal,
          timeout: this.config.timeout_ms,
        },
      );
      // the call that lost the race (cancelled below) must not surface as an unhandled rejection
      request.catch(() => undefined);
      const result = await Promise.race([request, needsInput]);
      return toToolOutcome(result as McpCallResult, this.deps.blobs);
    } finally {
      this.active.delete(call);
      ctx.signal.removeEventListener('abort', onAbort);
      stop.abort();
    }
  }

  // ---------------------------------------------------------------- lifecycle

  private async connect(): Promise<void> {
    this.stderrTail = '';
    // HTTP: server/discover first, 2026-07-28 with a server that answers it, the 2025-11-25
    // handshake with the rest; a question of a 2026 server (input_required) reaches the same
    // handler. Stdio keeps the 2025-11-25 handshake: the SDK probes a child by starting a second
    // one, and a 1.x server never answers the probe, so every start would wait out its timeout.
    const client = new (clientSdk().Client)(
      { name: 'runledger', version: VERSION },
      {
        capabilities: { elicitation: { form: {} } },
        ...(isStdioServer(this.config) ? {} : { versionNegotiation: { mode: 'auto' as const } }),
      },
    );
    client.setRequestHandler('elicitation/create', (request) =>
      this.elicit(request.params as Record<string, unknown>),
    );
    client.setNotificationHandler('notifications/tools/list_changed', () => {
      if (this.client === client)
        void this.listTools(client).catch((err) => this.warn('tools/list failed', err));
    });
    let transport: Transport;
    try {
      transport = this.newTransport();
    } catch (err) {
      this.failed(err);
      return;
    }
    // a close while starting is the start's failure, reported by connect's rejection below
    client.onclose = () => {
      if (this.client === client && this.state === 'ready') this.died('the connection closed');
    };
    this.client = client;
    this.transport = transport;
    try {
      const timeout = this.deps.startTimeoutMs ?? 15_000;
      await client.connect(transport, { timeout });
      await this.listTools(client, timeout);
      this.state = 'ready';
      this.error = null;
      this.connectedAt = Date.now();
      this.deps.logger.info?.({ mcp_server: this.config.name, tools: this.entries.size }, 'MCP server ready');
    } catch (err) {
      if (this.client !== client) return;
      this.client = null;
      this.transport = null;
      await client.close().catch(() => undefined);
      this.failed(err);
    }
  }

  private newTransport(): Transport {
    const c = this.config;
    if (!isStdioServer(c)) {
      const headers = Object.fromEntries(
        Object.entries(c.headers_from).map(([header, name]) => [header, this.deps.env[name] ?? '']),
      );
      return new (clientSdk().StreamableHTTPClientTransport)(new URL(c.url), { requestInit: { headers } });
    }
    const sandbox = this.deps.sandbox;
    const cwd = c.cwd ? path.resolve(sandbox.root, c.cwd) : sandbox.root;
    const env = {
      ...sandbox.scrubbedEnv(),
      ...Object.fromEntries(
        Object.entries(c.env_from).map(([key, name]) => [key, this.deps.env[name] ?? '']),
      ),
    };
    const program = resolveProgram(c.command, cwd);
    const child = sandbox.confineChild(program, c.args, {
      cwd,
      env,
      network: c.network,
      ...visibleFolders(program, c.args, cwd, sandbox.root, this.deps.privateFolders ?? []),
    });
    const transport = new (clientSdk().StdioClientTransport)({ ...child, cwd, stderr: 'pipe' });
    // drained (a full pipe would stall the child); its tail explains a failed start
    transport.stderr?.on('data', (chunk: Buffer) => {
      this.stderrTail = (this.stderrTail + chunk.toString('utf8')).slice(-STDERR_TAIL);
    });
    return transport;
  }

  /** Pages through tools/list; the registry then holds exactly these. */
  private async listTools(client: Client, timeout?: number): Promise<void> {
    const listed: McpToolDescription[] = [];
    let cursor: string | undefined;
    let ttlMs: number | null = null;
    do {
      const page = await client.listTools(cursor ? { cursor } : undefined, timeout ? { timeout } : undefined);
      listed.push(...page.tools);
      cursor = page.nextCursor;
      // a 2026-07-28 list says how long it stays fresh; the shortest page decides
      if (typeof page.ttlMs === 'number') ttlMs = Math.min(ttlMs ?? page.ttlMs, page.ttlMs);
    } while (cursor);
    const entries = new Map<string, McpToolEntry>();
    for (const tool of listed) {
      const entry = this.entryFor(tool);
      if (entries.has(entry.manifest.name))
        this.deps.logger.warn(
          { mcp_server: this.config.name, tool: tool.name },
          'MCP tool skipped: its name collides',
        );
      else entries.set(entry.manifest.name, entry);
    }
    if (this.client !== client) return;
    this.entries = entries;
    this.toolsTtlMs = ttlMs;
    this.scheduleRelist(client, ttlMs);
    this.deps.onToolsChanged();
  }

  /**
   * A server of 2026-07-28 pushes no list_changed without a stream of its own: its list is kept
   * for the ttlMs it gave (the SDK's response cache answers within it) and read again after.
   */
  private scheduleRelist(client: Client, ttlMs: number | null): void {
    this.stopRelisting();
    if (!ttlMs || ttlMs <= 0) return;
    this.relist = setTimeout(
      () => {
        this.relist = null;
        if (this.client === client && this.state === 'ready')
          void this.listTools(client).catch((err) => this.warn('tools/list failed', err));
      },
      Math.max(ttlMs, MIN_RELIST_MS),
    );
    this.relist.unref();
  }

  private stopRelisting(): void {
    if (this.relist) clearTimeout(this.relist);
    this.relist = null;
  }

  private entryFor(tool: McpToolDescription): McpToolEntry {
    const { $schema: _draft, ...schema } = tool.inputSchema as Record<string, unknown>;
    let validate: ValidateFunction | null = null;
    try {
      validate = this.ajv.compile(schema);
    } catch (err) {
      // the server validates its own input: a schema ajv cannot compile is left to it
      this.warn(`input schema of ${tool.name} not checked here`, err);
    }
    const a = tool.annotations ?? {};
    return {
      remoteName: tool.name,
      validate,
      manifest: {
        name: registryToolName(this.config.name, tool.name),
        description: (
          tool.description ||
          tool.title ||
          a.title ||
          `${tool.name} (MCP server ${this.config.name})`
        ).slice(0, 2000),
        args_schema: schema,
        requires_permission: true,
        idempotent: a.idempotentHint === true,
        timeout_ms: this.config.timeout_ms,
        secrets: [],
        sensitive_output: false,
        entry: 'index.js',
        read_only: a.readOnlyHint === true,
      },
    };
  }

  private died(reason: string): void {
    if (this.state === 'stopped') return;
    const stable = this.state === 'ready' && Date.now() - this.connectedAt >= STABLE_AFTER_MS;
    if (stable) this.failures = 0;
    this.stopRelisting();
    this.client = null;
    this.transport = null;
    this.entries.clear();
    this.deps.onToolsChanged();
    this.error = reason;
    this.state = 'restarting';
    this.deps.logger.warn(
      { mcp_server: this.config.name, error: reason },
      'MCP server stopped; restarting it',
    );
    this.scheduleRestart();
  }

  private failed(err: unknown): void {
    if (this.state === 'stopped') return;
    const said = this.stderrTail.trim();
    this.error = `${err instanceof Error ? err.message : String(err)}${said ? ` (stderr: ${said})` : ''}`;
    this.stderrTail = '';
    this.state = 'failed';
    this.entries.clear();
    this.deps.onToolsChanged();
    this.deps.logger.warn(
      { mcp_server: this.config.name, error: this.error },
      'MCP server failed to start; its tools are absent',
    );
    this.scheduleRestart();
  }

  private scheduleRestart(): void {
    if (this.timer || this.state === 'stopped') return;
    const base = this.deps.backoffMs ?? 500;
    const delay = Math.min(this.deps.maxBackoffMs ?? 30_000, base * 2 ** this.failures);
    this.failures++;
    this.timer = setTimeout(() => {
      this.timer = null;
      if (this.state === 'stopped') return;
      this.restarts++;
      void this.connect();
    }, delay);
    this.timer.unref();
  }

  /**
   * A question from the server belongs to the one call in flight (stdio carries no link between
   * them): answered from the log when it holds the answer; else the call stops with
   * ToolInputRequired and the server is told the question was cancelled.
   */
  private async elicit(params: Record<string, unknown>): Promise<ElicitResult> {
    if (params.mode === 'url') return { action: 'decline' };
    const calls = [...this.active];
    if (calls.length !== 1) {
      this.deps.logger.warn(
        { mcp_server: this.config.name, calls_in_flight: calls.length },
        'MCP server asked for input with no single call in flight; declined',
      );
      return { action: 'decline' };
    }
    const call = calls[0];
    if (!call.answer) return { action: 'decline' };
    const index = ++call.asked;
    const answer: ElicitationAnswer | undefined = call.answer(index);
    const schema = (params.requestedSchema ?? {}) as Record<string, unknown>;
    if (answer) {
      if (answer.action !== 'accept') return { action: 'decline' };
      // the form's defaults for the fields the answer left out (SEP-1034), as the server offered them
      const filled = checkElicitationContent(schema, answer.content);
      const content = filled.ok ? filled.content : answer.content;
      return { action: 'accept', content: content as ElicitResult['content'] };
    }
    call.inputRequired(
      new ToolInputRequired(
        index,
        { message: String(params.message ?? ''), requested_schema: schema },
        secretFieldOf(schema),
      ),
    );
    return { action: 'cancel' };
  }

  private warn(msg: string, err: unknown): void {
    this.deps.logger.warn(
      { mcp_server: this.config.name, error: err instanceof Error ? err.message : String(err) },
      msg,
    );
  }
}

/** The program's real path: a bare name is looked up on PATH, a relative path taken from `cwd`. */
function resolveProgram(command: string, cwd: string): string {
  const found = command.includes('/') ? path.resolve(cwd, command) : findOnPath(command);
  if (!found) throw new Error(`${command}: not found on PATH`);
  try {
    return realpathSync(found);
  } catch {
    throw new Error(`${command}: not found (${found})`);
  }
}

/** `p` is `dir` or inside it. */
const inside = (p: string, dir: string): boolean => p === dir || p.startsWith(dir + path.sep);

/** The outermost node_modules folder holding `file`: hoisted dependencies resolve from there. */
function nodeModulesOf(file: string): string | null {
  const at = file.indexOf(`${path.sep}node_modules${path.sep}`);
  return at === -1 ? null : file.slice(0, at + `${path.sep}node_modules`.length);
}

/**
 * The folder that makes a script named by path loadable: its node_modules folder, or the nearest
 * package (a folder with package.json: its module type and dependencies) below the home folder,
 * or else the script's own folder.
 */
function packageFolderOf(file: string): string {
  const modules = nodeModulesOf(file);
  if (modules) return modules;
  const stop = new Set([path.parse(file).root, homedir()]);
  for (let dir = path.dirname(file); !stop.has(dir); dir = path.dirname(dir))
    if (existsSync(path.join(dir, 'package.json'))) return dir;
  return path.dirname(file);
}

/** The real path of what an argument names by absolute path (`/x/y.js` or `--opt=/x/y`), if it exists. */
function existingPathIn(arg: string): string | null {
  const value = arg.startsWith('/') ? arg : /^--?[\w-]+=(\/.*)$/.exec(arg)?.[1];
  if (!value) return null;
  try {
    return realpathSync(value);
  } catch {
    return null;
  }
}

/**
 * What the confined child must see to start at all, read-only: the package its program lives in,
 * the package of each script or the folder each argument names by absolute path (`node
 * /x/node_modules/pkg/dist/index.js`), and its working folder when outside the root. Folders of
 * `hidden` (the service's data folder) stay out of sight even inside one of them.
 */
export function visibleFolders(
  program: string,
  args: readonly string[],
  cwd: string,
  root: string,
  hidden: readonly string[] = [],
): { readOnly: string[]; hidden: string[] } {
  const named = args.flatMap((arg) => {
    const p = existingPathIn(arg);
    if (!p) return [];
    return statSync(p).isDirectory() ? [p] : [packageFolderOf(p)];
  });
  const candidates = [packageFolderOf(program), ...named, ...(inside(cwd, root) ? [] : [cwd])];
  const readOnly = [...new Set(candidates)]
    .filter((f) => !inside(f, root) && !inside(f, '/usr'))
    // a data folder that is also a project folder (the database beside package.json) shows its node_modules only
    .filter((f) => !hidden.some((h) => inside(f, h) && (f === h || path.basename(f) !== 'node_modules')))
    // a folder inside another one listed is already visible
    .filter((f, _, all) => !all.some((other) => other !== f && inside(f, other)));
  return {
    readOnly,
    hidden: hidden.filter((h) => readOnly.some((f) => h !== f && inside(h, f))),
  };
}
