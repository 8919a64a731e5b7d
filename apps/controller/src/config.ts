import { existsSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { z } from 'zod';
import {
  AnswerEvaluatorSettings,
  AgentProfile,
  TaskBudgets,
  ConfigError,
  PermissionRulesConfig,
  PriceTable,
  ROLES,
} from '@runledger/contracts';
import { DEFAULT_BACKPRESSURE, MODEL_APIS, providerLabel } from '@runledger/runtime';
import { McpServersConfig, mcpEnvReferences } from '@runledger/tools';
import { isPostgresUrl, readKeyEncryptionKey, runningFromSources } from '@runledger/event-store';
import {
  DEFAULT_CATALOG_AFTER,
  StorageOptions,
  parseCatalogAfter,
  parseRetention,
} from '@runledger/state-store';
import { InboundHooksConfig } from './hooks/hook-config';

const intFromEnv = (min: number, max: number) => z.coerce.number().int().min(min).max(max);
/** A JSON value given as an env string (or as JSON already, from the config file). */
const jsonFromEnv = <T extends z.ZodType>(schema: T) =>
  z.preprocess((v) => {
    if (typeof v !== 'string') return v;
    try {
      return JSON.parse(v) as unknown;
    } catch {
      return v;
    }
  }, schema);

/** The OpenTelemetry variables' values are case-insensitive; a config file may give a boolean. */
const lowerCased = (v: unknown): unknown =>
  typeof v === 'string' || typeof v === 'boolean' ? String(v).toLowerCase() : v;

/**
 * One provider of the orchestrator's fallback chain (RUNLEDGER_FALLBACK_MODELS).
 * Its key is never written here: `api_key_env` names the environment variable
 * that holds it, read when the runtime is composed.
 */
export const FallbackModelConfig = z
  .object({
    /** how events name the provider; `<model>@<host of base_url>` when absent */
    name: z.string().min(1).max(100).optional(),
    base_url: z.string().url(),
    api_key_env: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be the name of an environment variable')
      .optional(),
    model: z.string().min(1),
    api_key: z
      .never({
        error: 'keys are not accepted here: name the environment variable that holds it in api_key_env',
      })
      .optional(),
  })
  .strict();
export type FallbackModelConfig = z.infer<typeof FallbackModelConfig>;

/**
 * Everything the service reads from its environment, parsed once at boot.
 * A bad value stops the boot with a message naming the variable.
 */
export const ConfigSchema = z.object({
  PORT: intFromEnv(0, 65535).default(3000),
  HOST: z.string().min(1).default('127.0.0.1'),
  /** a SQLite file path, or a postgres:// URL (several instances on one database) */
  RUNLEDGER_DB: z
    .string()
    .min(1)
    .refine((v) => isPostgresUrl(v) || !/^[a-z][a-z0-9+.-]*:\/\//i.test(v), {
      error: 'must be a SQLite file path or a postgres:// (postgresql://) URL',
    })
    .refine((v) => !isPostgresUrl(v) || URL.canParse(v), { error: 'is not a valid PostgreSQL URL' })
    .default('./data/runledger.db'),
  /** the tables' schema on PostgreSQL */
  RUNLEDGER_PG_SCHEMA: z
    .string()
    .regex(/^[a-z_][a-z0-9_]{0,62}$/, 'must be a lower-case SQL identifier')
    .default('public'),
  RUNLEDGER_PG_POOL_SIZE: intFromEnv(2, 200).default(10),
  /**
   * Where admin.token, secrets.key and the memory index file live: beside the
   * SQLite file by default; `./data` with PostgreSQL.
   */
  RUNLEDGER_DATA_DIR: z.string().min(1).optional(),
  RUNLEDGER_SQLITE_SYNCHRONOUS: z.enum(['OFF', 'NORMAL', 'FULL', 'EXTRA']).default('FULL'),
  /** on: appends and their fsyncs run in a worker thread, off the event loop; auto: on when running the build */
  RUNLEDGER_SQLITE_WRITER_THREAD: z.enum(['auto', 'on', 'off']).default('auto'),
  RUNLEDGER_ADMIN_TOKEN: z.string().min(16).optional(),
  RUNLEDGER_TOKENS_FILE: z.string().optional(),
  RUNLEDGER_ALLOWED_ROOT: z.string().optional(),
  RUNLEDGER_MODEL: z
    .string()
    .regex(/^(sys_util|openai|scripted:.+)$/, 'must be sys_util, openai or scripted:<path>')
    .default('sys_util'),
  OPENAI_BASE_URL: z.string().url().optional(),
  OPENAI_API_KEY: z.string().optional(),
  RUNLEDGER_MODEL_ORCHESTRATOR: z.string().optional(),
  RUNLEDGER_MODEL_CODER: z.string().optional(),
  RUNLEDGER_MODEL_CRITIC: z.string().optional(),
  RUNLEDGER_MODEL_UTILITY: z.string().optional(),
  /** openai: the chat completions API (`chat`) or the Responses API (`responses`, stored conversations continued by id) */
  RUNLEDGER_MODEL_API: z.enum(MODEL_APIS).default('chat'),
  /** openai: native tool calling (`tools`), or the JSON directive in the text for servers without tool support */
  RUNLEDGER_MODEL_PROTOCOL: z.enum(['tools', 'json']).default('tools'),
  /** off: answers arrive whole (for servers that cannot stream tool calls); no OUTPUT_CHUNK then */
  RUNLEDGER_MODEL_STREAM: z.enum(['on', 'off']).default('on'),
  /** JSON {"<role>": {"tool_choice": "auto"|"required"|"none", "parallel_tool_calls": bool}}: sent with the tools (tools protocol) */
  RUNLEDGER_MODEL_TOOL_CALLS: jsonFromEnv(
    z
      .object(
        Object.fromEntries(
          ROLES.map((r) => [
            r,
            z
              .object({
                tool_choice: z.enum(['auto', 'required', 'none']).optional(),
                parallel_tool_calls: z.boolean().optional(),
              })
              .strict()
              .optional(),
          ]),
        ),
      )
      .strict(),
  ).optional(),
  /**
   * JSON [{"base_url", "model", "api_key_env"?, "name"?}]: OpenAI-compatible providers asked in order
   * when the orchestrator's retries run out (provider_error, rate_limited, timeout), before sys_util
   */
  RUNLEDGER_FALLBACK_MODELS: jsonFromEnv(z.array(FallbackModelConfig).max(10)).optional(),
  RUNLEDGER_SANDBOX: z.enum(['auto', 'bwrap', 'process']).default('auto'),
  RUNLEDGER_PLUGINS: z.string().optional(),
  /**
   * JSON [{name, command, args?, env_from?, cwd?, network?, timeout_ms?} | {name, url, headers_from?, timeout_ms?}]:
   * MCP servers whose tools join the registry as mcp__<server>__<tool>; keys only by variable name
   */
  RUNLEDGER_MCP_SERVERS: jsonFromEnv(McpServersConfig).optional(),
  /** JSON PermissionRulesConfig added to the built-in permission rules */
  RUNLEDGER_PERMISSION_RULES: jsonFromEnv(PermissionRulesConfig).optional(),
  /** bytes of shell output kept per command (the rest is dropped, the result marked truncated) */
  RUNLEDGER_TOOL_OUTPUT_MAX_BYTES: intFromEnv(1024, 64 * 1024 * 1024).default(64 * 1024),
  RUNLEDGER_CONCURRENCY: intFromEnv(1, 256).default(16),
  /** tasks waiting for a run slot before POST /tasks answers 429 */
  RUNLEDGER_QUEUE_MAX: intFromEnv(1, 10_000_000).default(DEFAULT_BACKPRESSURE.maxQueued),
  /** submissions waiting for their TASK_RECEIVED to be durable before POST /tasks answers 503 */
  RUNLEDGER_SUBMIT_MAX_PENDING: intFromEnv(1, 10_000_000).default(DEFAULT_BACKPRESSURE.maxPendingSubmissions),
  /** sustained event-loop delay (ms) above which POST /tasks answers 503 and queued tasks wait; 0: not watched */
  RUNLEDGER_OVERLOAD_LOOP_DELAY_MS: intFromEnv(0, 600_000).default(DEFAULT_BACKPRESSURE.maxLoopDelayMs),
  /** sustained share of time the event loop is busy above which POST /tasks answers 503 and queued tasks wait; 1: not watched */
  RUNLEDGER_OVERLOAD_LOOP_UTILIZATION: z.coerce
    .number()
    .gt(0)
    .max(1)
    .default(DEFAULT_BACKPRESSURE.maxLoopUtilization),
  /** share of time the event loop is busy above which, while submissions arrive, queued tasks wait to start and running tasks take turns; 1: not held */
  RUNLEDGER_TASK_START_LOOP_UTILIZATION: z.coerce
    .number()
    .gt(0)
    .max(1)
    .default(DEFAULT_BACKPRESSURE.maxLoopUtilizationForStarts),
  /** longest the oldest queued task is held back for submissions (ms) before tasks run at full speed again; 0: no bound */
  RUNLEDGER_TASK_START_MAX_WAIT_MS: intFromEnv(0, 3_600_000).default(DEFAULT_BACKPRESSURE.maxStartWaitMs),
  RUNLEDGER_MAX_ROUNDS: intFromEnv(1, 1000).default(10),
  /** tool-call replies a coder step may make before it must answer in text (tools protocol); 8 when unset */
  RUNLEDGER_CODER_TOOL_TURNS: intFromEnv(1, 100).optional(),
  RUNLEDGER_BODY_LIMIT: z
    .string()
    .regex(/^\d+(b|kb|mb)?$/i)
    .default('1mb'),
  RUNLEDGER_CORS_ORIGIN: z.string().optional(),
  /** requests per minute per bearer token; 0 turns rate limiting off */
  RUNLEDGER_RATE_LIMIT: intFromEnv(0, 10_000_000).default(1200),
  /** WebSocket ping interval; a peer that misses one pong is dropped */
  RUNLEDGER_WS_HEARTBEAT_MS: intFromEnv(50, 3_600_000).default(30_000),
  /** bytes a WebSocket client may have unsent before it is disconnected as a slow consumer */
  RUNLEDGER_WS_MAX_BUFFER: intFromEnv(1024, 1_073_741_824).default(8 * 1024 * 1024),
  // Run discipline (libs/runtime/src/discipline). Budgets use the API's `budgets` keys;
  // RUNLEDGER_MAX_ROUNDS is the default and the cap of max_rounds; the maximums cap what a task may ask for.
  RUNLEDGER_BUDGET_DEFAULTS: jsonFromEnv(TaskBudgets).optional(),
  RUNLEDGER_BUDGET_MAXIMUMS: jsonFromEnv(TaskBudgets).optional(),
  /** {"<model>": {"input_per_mtok": USD, "output_per_mtok": USD}, "*": {...}} */
  RUNLEDGER_PRICE_TABLE: jsonFromEnv(PriceTable).optional(),
  /** characters per token when a provider reports no usage */
  RUNLEDGER_CHARS_PER_TOKEN: z.coerce.number().positive().max(100).optional(),
  RUNLEDGER_CONTEXT_WINDOW_TOKENS: intFromEnv(256, 10_000_000).optional(),
  /** completion tokens reserved out of the context window */
  RUNLEDGER_MAX_COMPLETION_TOKENS: intFromEnv(1, 1_000_000).optional(),
  /** fraction of the prompt budget kept free for estimation error */
  RUNLEDGER_PROMPT_SAFETY_MARGIN: z.coerce.number().min(0).max(0.9).optional(),
  RUNLEDGER_MODEL_RETRIES: intFromEnv(0, 10).optional(),
  RUNLEDGER_TOOL_RETRIES: intFromEnv(0, 10).optional(),
  RUNLEDGER_RETRY_BASE_MS: intFromEnv(0, 600_000).optional(),
  RUNLEDGER_RETRY_MAX_MS: intFromEnv(0, 3_600_000).optional(),
  /** a Retry-After longer than this is not waited for: fall back or stop */
  RUNLEDGER_RETRY_AFTER_MAX_MS: intFromEnv(0, 3_600_000).optional(),
  /** consecutive breakages of one tool in a task that open its circuit */
  RUNLEDGER_CIRCUIT_BREAKER_THRESHOLD: intFromEnv(1, 1000).optional(),
  /** upper bound of the adaptive per-signature tool timeout */
  RUNLEDGER_TOOL_TIMEOUT_CAP_MS: intFromEnv(1, 86_400_000).optional(),
  RUNLEDGER_MODEL_TIMEOUT_MS: intFromEnv(1, 3_600_000).optional(),
  /** a model stream silent this long is a timeout */
  RUNLEDGER_STREAM_IDLE_TIMEOUT_MS: intFromEnv(1, 3_600_000).optional(),
  /** consecutive directive-less orchestrator answers before missing_completion_signal */
  RUNLEDGER_COMPLETION_MAX_MISSES: intFromEnv(1, 100).optional(),
  /** repeats of an earlier round in a row that earn a reminder (one more stops with repeat_cycle) */
  RUNLEDGER_REPEAT_THRESHOLD: intFromEnv(1, 100).optional(),
  /** plan steps of one task run at once (agent steps too: a plan's children run side by side up to it) */
  RUNLEDGER_STEP_CONCURRENCY: intFromEnv(1, 64).default(4),
  /**
   * JSON [{"name", "description", "models"?: {"<role>": "<model>"}, "tools"?: [names] | null, "instructions"?}]:
   * the agents a task may delegate to, beside the built-in `coder` (an entry named coder replaces it); a remote
   * agent: {"name", "a2a": {"url" | "card_url", "headers_from"?}, "timeout_ms"?}
   */
  RUNLEDGER_AGENTS: jsonFromEnv(
    z
      .array(AgentProfile)
      .max(100)
      .refine(
        (agents) => new Set(agents.map((a) => a.name)).size === agents.length,
        'agent names must be unique',
      ),
  ).optional(),
  /**
   * The address other agents reach this service at (behind a proxy, its public URL): the agent
   * card's interfaces name it. Default: http://<HOST>:<PORT>
   */
  RUNLEDGER_PUBLIC_URL: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).optional(),
  /** the HMAC key outbound deliveries (A2A push notifications, task callbacks) are signed with; default: outbound-signing.key in the data folder, generated once */
  RUNLEDGER_OUTBOUND_SIGNING_KEY: z.string().min(16, 'must be at least 16 characters').optional(),
  /**
   * JSON [{"name", "secret_env", "signature"?, "task" | "signal", ...}]: inbound webhooks, POST /hooks/<name>,
   * verified with the HMAC secret the variable secret_env holds, mapped to a task or a signal (docs/time.md#webhooks)
   */
  RUNLEDGER_HOOKS: jsonFromEnv(InboundHooksConfig).optional(),
  /** attempts of one outbound delivery before it is given up */
  RUNLEDGER_OUTBOUND_MAX_ATTEMPTS: intFromEnv(1, 100).default(8),
  /** the first retry's delay; each next one doubles, up to RUNLEDGER_OUTBOUND_BACKOFF_MAX_MS */
  RUNLEDGER_OUTBOUND_BACKOFF_MS: intFromEnv(1, 3_600_000).default(1_000),
  RUNLEDGER_OUTBOUND_BACKOFF_MAX_MS: intFromEnv(1, 86_400_000).default(300_000),
  /** one delivery request's time limit */
  RUNLEDGER_OUTBOUND_TIMEOUT_MS: intFromEnv(1, 600_000).default(10_000),
  /** how many delegations down from the task a person submitted a task may be */
  RUNLEDGER_MAX_DELEGATION_DEPTH: intFromEnv(0, 20).default(3),
  /** JSON array of regular expressions: every match is masked in an incident bundle (runledger bundle; docs/bundles.md) */
  RUNLEDGER_BUNDLE_REDACT: jsonFromEnv(
    z
      .array(
        z.string().refine(
          (source) => {
            try {
              new RegExp(source, 'g');
              return source.length > 0;
            } catch {
              return false;
            }
          },
          { error: 'must be a non-empty regular expression' },
        ),
      )
      .max(200),
  ).optional(),
  /** snapshots of a running task (after a round or plan step, on waiting for a person, every N events) */
  RUNLEDGER_CHECKPOINTS: z.enum(['on', 'off']).default('on'),
  /** todos offered from a task's first round and a request for a change reminded to create its own (docs/todos.md) */
  RUNLEDGER_TODOS: z.enum(['on', 'off']).default('off'),
  /** the runtime decides each round's tool surface from the task and its log (docs/round-policy.md) */
  RUNLEDGER_ROUND_POLICY: z.enum(['on', 'off']).default('off'),
  /** JSON {"threshold"?, "max_tokens"?, "criteria"?, "timeout_ms"?}: the orchestrator's own answers are evaluated (agents: their profile's `evaluator`) */
  RUNLEDGER_EVALUATOR: jsonFromEnv(AnswerEvaluatorSettings).optional(),
  /**
   * retention (docs/retention.md): off, a duration (7d: finished task trees leave the live log that long
   * after they ended) or a JSON list of rules [{older_than, status?, session_id?, agent?}], first match decides
   */
  RUNLEDGER_RETENTION: z
    .union([z.string(), z.array(z.unknown())])
    .default('off')
    .superRefine((value, ctx) => {
      try {
        parseRetention(value);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
      }
    }),
  /**
   * the second tier of retention (docs/retention.md): tasks archived this long ago leave the live
   * database for the archive's catalog (their summary rows and archive records); `off`: they stay
   */
  RUNLEDGER_RETENTION_CATALOG_AFTER: z
    .string()
    .default(DEFAULT_CATALOG_AFTER)
    .superRefine((value, ctx) => {
      try {
        parseCatalogAfter(value);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
      }
    }),
  /** erasure by crypto-shredding (docs/retention.md): `on` seals the personal fields of new events under their session's data key */
  RUNLEDGER_ERASURE: z.enum(['on', 'off']).default('off'),
  /**
   * a file of 32 bytes (raw, or base64: `openssl rand -base64 32`), the key-encryption key: the data
   * keys in `<db>.keys` are stored wrapped with it (AES-256-GCM); a key file written with one refuses
   * to open without it. SQLite only
   */
  RUNLEDGER_ERASURE_KEY_FILE: z
    .string()
    .min(1)
    .optional()
    .superRefine((path, ctx) => {
      if (path === undefined) return;
      try {
        readKeyEncryptionKey(path);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
      }
    }),
  /** tasks per archive segment at most: what one write transaction moves */
  RUNLEDGER_RETENTION_BATCH: intFromEnv(1, 10_000).default(200),
  /** how often the server applies the retention policy itself (0: never; `runledger archive` still does) */
  RUNLEDGER_RETENTION_SWEEP_MS: intFromEnv(0, 7 * 86_400_000).default(600_000),
  /** the sweeper's least rest between two archive batches' write transactions: appends run meanwhile */
  RUNLEDGER_RETENTION_REST_MS: intFromEnv(0, 60_000).default(100),
  /** tasks per batch of the server's sweeper: small, so no batch holds the writer for long */
  RUNLEDGER_RETENTION_SWEEP_BATCH: intFromEnv(1, 10_000).default(20),
  /** events after which a checkpoint is saved even without a milestone */
  RUNLEDGER_CHECKPOINT_EVERY_EVENTS: intFromEnv(1, 100_000).default(50),
  /** how often a process renews the leases of the tasks it runs, and looks for tasks nobody runs (crash recovery) */
  RUNLEDGER_LEASE_RENEW_MS: intFromEnv(50, 3_600_000).default(5_000),
  /** how long a task's lease lasts without renewal: after that another process takes the task over */
  RUNLEDGER_LEASE_TTL_MS: intFromEnv(100, 86_400_000).default(20_000),
  // Critic and memory (libs/critic, libs/memory).
  /** auto: the critic model when RUNLEDGER_MODEL_CRITIC (or a scripted critic) is set, else the heuristic critic */
  RUNLEDGER_CRITIC: z.enum(['auto', 'model', 'heuristic', 'off']).default('auto'),
  RUNLEDGER_CRITIC_TIMEOUT_MS: intFromEnv(1, 600_000).default(15_000),
  RUNLEDGER_MEMORY: z.enum(['on', 'off']).default('on'),
  /** hash: local feature hashing, no model; openai: OPENAI_BASE_URL /embeddings */
  RUNLEDGER_EMBEDDER: z.enum(['hash', 'openai']).default('hash'),
  RUNLEDGER_EMBEDDING_MODEL: z.string().min(1).optional(),
  RUNLEDGER_EMBEDDING_DIM: intFromEnv(8, 8192).default(384),
  /** the HNSW file; default: beside the database (<db>.memory.hnsw) */
  RUNLEDGER_MEMORY_INDEX: z.string().min(1).optional(),
  RUNLEDGER_MEMORY_MIN_WEIGHT: z.coerce.number().min(0).max(1).optional(),
  RUNLEDGER_MEMORY_DEDUP_THRESHOLD: z.coerce.number().min(0).max(1).optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  // OpenTelemetry traces (apps/controller/src/telemetry), under the variables' standard names.
  /** OTLP/HTTP base URL; traces go to <endpoint>/v1/traces. Unset (and no traces endpoint): no tracing at all */
  OTEL_EXPORTER_OTLP_ENDPOINT: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).optional(),
  /** the full OTLP/HTTP traces URL, used as is; wins over OTEL_EXPORTER_OTLP_ENDPOINT */
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z
    .url({ protocol: /^https?$/, error: 'must be an http(s) URL' })
    .optional(),
  OTEL_SERVICE_NAME: z.string().min(1).default('runledger'),
  /** true: tracing stays off even with an endpoint */
  OTEL_SDK_DISABLED: z
    .preprocess(lowerCased, z.enum(['true', 'false']))
    .default('false')
    .transform((v) => v === 'true'),
  /** milliseconds between two exports of the finished spans (the batch processor's delay) */
  OTEL_BSP_SCHEDULE_DELAY: intFromEnv(0, 3_600_000).default(5000),
  /**
   * prompt, completion and tool content on spans: true / SPAN_ONLY / SPAN_AND_EVENT turn it on;
   * false / NO_CONTENT / EVENT_ONLY (no span content; Runledger emits no GenAI events) leave it off
   */
  OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: z
    .preprocess(
      lowerCased,
      z.enum(['true', 'false', 'span_only', 'span_and_event', 'no_content', 'event_only']),
    )
    .default('false')
    .transform((v) => v === 'true' || v === 'span_only' || v === 'span_and_event'),
});
export type AppConfig = z.infer<typeof ConfigSchema>;

/** Injection token for the parsed config. */
export const APP_CONFIG = Symbol('APP_CONFIG');

/** The storage driver RUNLEDGER_DB selects, with its settings. */
export function storageOptionsFrom(c: AppConfig): StorageOptions {
  if (isPostgresUrl(c.RUNLEDGER_DB)) {
    if (c.RUNLEDGER_ERASURE_KEY_FILE)
      throw new Error(
        'RUNLEDGER_ERASURE_KEY_FILE: data keys are wrapped on SQLite only; PostgreSQL keeps them unwrapped in data_keys and stream_keys (docs/retention.md)',
      );
    return {
      driver: 'postgres',
      url: c.RUNLEDGER_DB,
      schema: c.RUNLEDGER_PG_SCHEMA,
      maxConnections: c.RUNLEDGER_PG_POOL_SIZE,
      sealPayloads: c.RUNLEDGER_ERASURE === 'on',
    };
  }
  return {
    driver: 'sqlite',
    path: resolve(c.RUNLEDGER_DB),
    sealPayloads: c.RUNLEDGER_ERASURE === 'on',
    ...(c.RUNLEDGER_ERASURE_KEY_FILE
      ? { keyEncryptionKey: readKeyEncryptionKey(c.RUNLEDGER_ERASURE_KEY_FILE) }
      : {}),
    synchronous: c.RUNLEDGER_SQLITE_SYNCHRONOUS,
    writerThread:
      c.RUNLEDGER_SQLITE_WRITER_THREAD === 'on' ||
      (c.RUNLEDGER_SQLITE_WRITER_THREAD === 'auto' && !runningFromSources() && 'while_concurrent'),
  };
}

/** The folder of the files kept outside the database (admin.token, secrets.key, the memory index). */
export const dataDirOf = (c: AppConfig, cwd = process.cwd()): string =>
  resolve(
    cwd,
    c.RUNLEDGER_DATA_DIR ??
      (isPostgresUrl(c.RUNLEDGER_DB) ? './data' : dirname(resolve(cwd, c.RUNLEDGER_DB))),
  );

/** What no tool's child process may see: the data folder and, for SQLite, the database's folder. */
export const privateFoldersOf = (c: AppConfig, cwd = process.cwd()): string[] => [
  ...new Set([
    dataDirOf(c, cwd),
    ...(isPostgresUrl(c.RUNLEDGER_DB) ? [] : [dirname(resolve(cwd, c.RUNLEDGER_DB))]),
  ]),
];

export function loadConfig(env: NodeJS.ProcessEnv = process.env): AppConfig {
  let fileValues: Record<string, unknown> = {};
  const configPath = env.RUNLEDGER_CONFIG;
  if (configPath) {
    if (!existsSync(configPath)) throw new ConfigError(`RUNLEDGER_CONFIG: file not found: ${configPath}`);
    try {
      fileValues = JSON.parse(readFileSync(configPath, 'utf8')) as Record<string, unknown>;
    } catch (e) {
      throw new ConfigError(`RUNLEDGER_CONFIG: not valid JSON (${(e as Error).message})`);
    }
  }
  const merged: Record<string, unknown> = { ...fileValues };
  for (const key of Object.keys(ConfigSchema.shape)) {
    if (env[key] !== undefined && env[key] !== '') merged[key] = env[key];
  }
  const parsed = ConfigSchema.safeParse(merged);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n  ${lines.join('\n  ')}`, parsed.error.issues);
  }
  const problems = [
    ...modelProblems(parsed.data),
    ...fallbackModelProblems(parsed.data, env),
    ...leaseProblems(parsed.data),
    ...mcpServerProblems(parsed.data, env),
    ...hookProblems(parsed.data, env),
  ];
  if (problems.length > 0) throw new ConfigError(`invalid configuration:\n  ${problems.join('\n  ')}`);
  return parsed.data;
}

/**
 * The environment variables that hold provider keys and the webhooks' secrets: the service drops them
 * once its clients and hooks are built.
 */
export function providerKeyNames(config: AppConfig): string[] {
  const fallbacks = (config.RUNLEDGER_FALLBACK_MODELS ?? []).flatMap((p) =>
    p.api_key_env ? [p.api_key_env] : [],
  );
  return ['OPENAI_API_KEY', ...fallbacks, ...(config.RUNLEDGER_HOOKS ?? []).map((h) => h.secret_env)];
}

/** The label the primary provider goes by in fallback events (as OpenAiBackend / ScriptedBackend name it). */
function primaryLabel(config: AppConfig): string {
  if (config.RUNLEDGER_MODEL !== 'openai') return 'scripted';
  return providerLabel(config.RUNLEDGER_MODEL_ORCHESTRATOR ?? 'openai', config.OPENAI_BASE_URL);
}

/** An openai model with no model name would silently leave every task to sys_util's help text. */
function modelProblems(config: AppConfig): string[] {
  if (config.RUNLEDGER_MODEL !== 'openai' || config.RUNLEDGER_MODEL_ORCHESTRATOR) return [];
  return [
    'RUNLEDGER_MODEL_ORCHESTRATOR: RUNLEDGER_MODEL is openai but no orchestrator model is named; set RUNLEDGER_MODEL_ORCHESTRATOR to the model the server serves (e.g. gpt-4o-mini, llama3.1)',
  ];
}

/** A lease renewed less often than it expires would lapse between two beats and hand a live task over. */
function leaseProblems(config: AppConfig): string[] {
  if (config.RUNLEDGER_LEASE_RENEW_MS < config.RUNLEDGER_LEASE_TTL_MS) return [];
  return [
    `RUNLEDGER_LEASE_TTL_MS: ${config.RUNLEDGER_LEASE_TTL_MS} must be longer than RUNLEDGER_LEASE_RENEW_MS (${config.RUNLEDGER_LEASE_RENEW_MS}), or leases lapse between two renewals; a few renewals' worth (the defaults: 20000 and 5000) rides out a slow one`,
  ];
}

/**
 * What the schema cannot see: a chain needs a model to fall back from, every
 * named key variable must be set, and every provider a distinct label.
 */
function fallbackModelProblems(config: AppConfig, env: NodeJS.ProcessEnv): string[] {
  const chain = config.RUNLEDGER_FALLBACK_MODELS ?? [];
  if (chain.length === 0) return [];
  const v = 'RUNLEDGER_FALLBACK_MODELS';
  if (config.RUNLEDGER_MODEL === 'sys_util')
    return [`${v}: RUNLEDGER_MODEL is sys_util, so there is no model to fall back from`];
  const problems: string[] = [];
  const labels = [primaryLabel(config)];
  chain.forEach((p, i) => {
    if (p.api_key_env && !env[p.api_key_env])
      problems.push(`${v}.${i}.api_key_env: environment variable ${p.api_key_env} is not set`);
    const label = p.name ?? providerLabel(p.model, p.base_url);
    if (labels.includes(label))
      problems.push(`${v}.${i}: provider ${label} is already in the chain; give it a distinct "name"`);
    labels.push(label);
  });
  return problems;
}

/** Every variable an MCP server's env_from or headers_from names must be set: a server without its key would fail later, less clearly. */
function mcpServerProblems(config: AppConfig, env: NodeJS.ProcessEnv): string[] {
  return mcpEnvReferences(config.RUNLEDGER_MCP_SERVERS ?? [])
    .filter((ref) => !env[ref.name])
    .map((ref) => `RUNLEDGER_MCP_SERVERS.${ref.path}: environment variable ${ref.name} is not set`);
}

/** Every webhook's secret variable must be set: a hook without its secret could verify nothing. */
function hookProblems(config: AppConfig, env: NodeJS.ProcessEnv): string[] {
  return (config.RUNLEDGER_HOOKS ?? []).flatMap((h, i) =>
    env[h.secret_env]
      ? []
      : [`RUNLEDGER_HOOKS.${i}.secret_env: environment variable ${h.secret_env} is not set`],
  );
}
