import { z } from 'zod';
import { DEFAULT_MEMORY_POLICY } from '@runledger/memory';
import {
  DEFAULT_BUDGET_MAXIMUMS,
  DEFAULT_BUDGETS,
  DEFAULT_CHARS_PER_TOKEN,
  DEFAULT_CODER_TOOL_TURNS,
  DEFAULT_DISCIPLINE_SETTINGS,
} from '@runledger/runtime';
import { ConfigSchema } from '../config';

export type ConfigKey = keyof typeof ConfigSchema.shape;

const GROUPS = [
  'Server',
  'Storage',
  'Tokens',
  'Models',
  'Tools and permissions',
  'Load',
  'Run discipline',
  'Delegation',
  'A2A and outbound deliveries',
  'Checkpoints and leases',
  'Critic and memory',
  'Logs and traces',
] as const;
type Group = (typeof GROUPS)[number];

interface VariableDoc {
  group: Group;
  /** what the variable does; Markdown, one line */
  description: string;
  /** the default where the schema leaves the variable unset and another part of the code decides */
  default?: string;
}

const retry = DEFAULT_DISCIPLINE_SETTINGS.retry;
const inlineJson = (value: unknown) => `\`${JSON.stringify(value)}\``;
const code = (value: string | number) => `\`${value}\``;
const prompt = DEFAULT_DISCIPLINE_SETTINGS.prompt;

/**
 * What each variable of ConfigSchema means. Keyed by the schema's own keys, so a variable added to
 * the schema without a line here fails the typecheck; `npm run docs:config` renders the table.
 */
export const CONFIG_REFERENCE: Record<ConfigKey, VariableDoc> = {
  PORT: { group: 'Server', description: 'HTTP and WebSocket port' },
  HOST: { group: 'Server', description: 'bind address' },
  RUNLEDGER_DB: {
    group: 'Storage',
    description:
      'SQLite file (its folder created, migrated at boot), or a `postgres://` / `postgresql://` URL: several instances on one database (see [storage.md](storage.md#postgresql))',
  },
  RUNLEDGER_PG_SCHEMA: {
    group: 'Storage',
    description: 'PostgreSQL: the schema the tables live in (created if missing)',
  },
  RUNLEDGER_PG_POOL_SIZE: {
    group: 'Storage',
    description:
      'PostgreSQL: connections per instance (one more is held for LISTEN while anyone follows the log)',
  },
  RUNLEDGER_DATA_DIR: {
    group: 'Storage',
    description: 'where `admin.token`, `secrets.key` and the memory index file live',
    default: 'beside the SQLite file; `./data` with PostgreSQL',
  },
  RUNLEDGER_SQLITE_SYNCHRONOUS: {
    group: 'Storage',
    description:
      "the event log's durability. `FULL`: an acknowledged append survives power loss; `NORMAL` (WAL) may lose the last commits on power loss, never corrupts. The other tables (checkpoint snapshots, memory entries, leases, the process registry) are written at `NORMAL` at most: they are rebuilt from the log or matter only while the process lives",
  },
  RUNLEDGER_SQLITE_WRITER_THREAD: {
    group: 'Storage',
    description:
      "`on`: the append transactions (group-committed) and the connection's other writes run on a second connection in a worker thread, so an fsync never blocks HTTP, WebSocket or the runtime; reads stay on the main connection. `off`: the same transactions on the main thread. `auto`: when running the build (`npm start`, an installed CLI), the thread while appends of more than one task come together (and for 1 s after), the main thread for a lone appender, which waits for its own commit anyway and is spared the round trips (a file another process is writing sends it to the thread too); `off` when running the TypeScript sources (tests), where the thread would compile its own copy of the modules",
  },
  RUNLEDGER_ADMIN_TOKEN: {
    group: 'Tokens',
    description: 'the admin token (every scope)',
    default: 'generated on first boot into `admin.token` in the data folder',
  },
  RUNLEDGER_TOKENS_FILE: {
    group: 'Tokens',
    description:
      'a JSON file `[{name, token, scopes}]` of more tokens (scopes: `tasks:read`, `tasks:write`, `approvals`, `admin`)',
  },
  RUNLEDGER_ALLOWED_ROOT: {
    group: 'Tools and permissions',
    description: 'the only folder tools may read, write or run in',
    default: 'server: `./data/workspace`; CLI: the working directory',
  },
  RUNLEDGER_MODEL: {
    group: 'Models',
    description:
      '`sys_util` (the deterministic intent parser, no model), `openai` (any OpenAI-compatible server), or `scripted:<path>` (recorded answers); see [models.md](models.md)',
  },
  OPENAI_BASE_URL: {
    group: 'Models',
    description: "the OpenAI-compatible server's `/v1` address",
    default: '`https://api.openai.com/v1`',
  },
  OPENAI_API_KEY: {
    group: 'Models',
    description: 'its key; the service drops it from its own environment once the clients are built',
  },
  RUNLEDGER_MODEL_ORCHESTRATOR: {
    group: 'Models',
    description: 'the model that decides each step; required with `openai`',
  },
  RUNLEDGER_MODEL_CODER: {
    group: 'Models',
    description: "the coder role's model (plan steps of kind `coder`)",
    default: "the orchestrator's",
  },
  RUNLEDGER_MODEL_CRITIC: {
    group: 'Models',
    description: "the critic role's model (scores tool outcomes)",
    default: "the orchestrator's",
  },
  RUNLEDGER_MODEL_UTILITY: {
    group: 'Models',
    description: "the utility role's model (summarises old rounds when the prompt runs out of room)",
    default: "the orchestrator's",
  },
  RUNLEDGER_MODEL_API: {
    group: 'Models',
    description:
      "`chat`: `/v1/chat/completions`; `responses`: `/v1/responses`, continuing the stored conversation with `previous_response_id` when the log's anchors match, else sending it whole (see docs/models.md)",
  },
  RUNLEDGER_MODEL_PROTOCOL: {
    group: 'Models',
    description:
      '`tools`: native tool calling (tools sent as `tools`, replies with `tool_calls`); `json`: the directive as JSON text, for servers without tool support',
  },
  RUNLEDGER_MODEL_STREAM: {
    group: 'Models',
    description: '`off`: answers arrive whole (servers that cannot stream tool calls); no OUTPUT_CHUNK then',
  },
  RUNLEDGER_MODEL_TOOL_CALLS: {
    group: 'Models',
    description:
      'JSON `{"<role>": {"tool_choice": "auto"|"required"|"none", "parallel_tool_calls": bool}}`, sent with the tools',
    default: "the server's",
  },
  RUNLEDGER_FALLBACK_MODELS: {
    group: 'Models',
    description:
      'JSON `[{"base_url", "model", "api_key_env"?, "name"?}]`: OpenAI-compatible providers asked in order when the orchestrator\'s (or a coder step\'s) retries run out on `provider_error` / `rate_limited` / `timeout`, before sys_util; `api_key_env` names the variable holding the key (a key in the JSON is refused)',
  },
  RUNLEDGER_SANDBOX: {
    group: 'Tools and permissions',
    description:
      '`bwrap` (bubblewrap, fails closed), `process` (the service user, scrubbed environment), or `auto` (bwrap when it works, else process, with a warning); see [security.md](security.md)',
  },
  RUNLEDGER_PLUGINS: {
    group: 'Tools and permissions',
    description: 'extra tool plugin folders, `:`-separated (plugins are trusted code)',
  },
  RUNLEDGER_MCP_SERVERS: {
    group: 'Tools and permissions',
    description:
      'JSON list of MCP servers whose tools join the registry as `mcp__<server>__<tool>`; keys only by variable name (see [mcp.md](mcp.md))',
  },
  RUNLEDGER_PERMISSION_RULES: {
    group: 'Tools and permissions',
    description:
      'JSON rules added to the built-in permission rules (`hard_stop_programs`, `deny_programs`, `prompt_programs`, `allow_programs`, `patterns`, `protected_paths`, `mcp_allow`, ...)',
  },
  RUNLEDGER_TOOL_OUTPUT_MAX_BYTES: {
    group: 'Tools and permissions',
    description: 'bytes of shell output kept per command (the rest is dropped, the result marked truncated)',
  },
  RUNLEDGER_CONCURRENCY: {
    group: 'Load',
    description:
      'tasks run at once (an agent task spends most of its time waiting for its model, tools and commits; tasks running together share each commit)',
  },
  RUNLEDGER_QUEUE_MAX: {
    group: 'Load',
    description:
      'tasks waiting for a run slot before `POST /tasks` answers `429 queue_full` (see [durability.md](durability.md#submission-under-load))',
  },
  RUNLEDGER_SUBMIT_MAX_PENDING: {
    group: 'Load',
    description:
      'submissions waiting for their `TASK_RECEIVED` to be durable before `POST /tasks` answers `503 overloaded`',
  },
  RUNLEDGER_OVERLOAD_LOOP_DELAY_MS: {
    group: 'Load',
    description:
      'sustained event-loop delay above which `POST /tasks` answers `503 overloaded` and queued tasks wait to start; `0` turns it off',
  },
  RUNLEDGER_OVERLOAD_LOOP_UTILIZATION: {
    group: 'Load',
    description:
      'sustained share of time the event loop is busy above which the same happens; `1` turns it off',
  },
  RUNLEDGER_TASK_START_LOOP_UTILIZATION: {
    group: 'Load',
    description:
      "share of time the event loop is busy (with the SQLite writer thread's share added) above which, while submissions arrive, queued tasks wait to start (one always runs) and running tasks take one step among them every 20 ms; `1` turns it off",
  },
  RUNLEDGER_TASK_START_MAX_WAIT_MS: {
    group: 'Load',
    description:
      "longest the oldest queued task is held back for submissions: running tasks' steps come closer as it nears this wait, and past it tasks run at full speed; `0`: no bound",
  },
  RUNLEDGER_MAX_ROUNDS: {
    group: 'Run discipline',
    description: "default (and cap) of a task's `max_rounds`",
  },
  RUNLEDGER_TODOS: {
    group: 'Run discipline',
    description:
      "`on`: every task is offered todos from its first round (the todo tool, a plan's `todos`) and a request for a change is reminded once to create its own; `off`: todos are offered once a plan declares them. Either way required todos gate acceptance; recorded per task (see [todos.md](todos.md))",
  },
  RUNLEDGER_ROUND_POLICY: {
    group: 'Run discipline',
    description:
      "`on`: the runtime decides each round's tool surface (retrieval, inspection, mutation, answer_only) from the task and its log, offers mutating tools only when the request asks for a change or `allow_mutation` is set, and refuses calls outside the surface; `off`: every round offers every tool. Recorded per task (see [round-policy.md](round-policy.md))",
  },
  RUNLEDGER_EVALUATOR: {
    group: 'Run discipline',
    description:
      'JSON `{"threshold"?: 0.7, "max_tokens"?: 8000, "criteria"?: "", "timeout_ms"?: 30000}`: the critic role\'s model scores the final answer of the orchestrator\'s own tasks before they end, and below the threshold the model answers once more with the evaluation as feedback; `max_tokens` is the evaluator\'s own budget per task. A delegated agent\'s profile has its own `evaluator`. Recorded per task (see [evaluation.md](evaluation.md))',
    default: 'off',
  },
  RUNLEDGER_CODER_TOOL_TURNS: {
    group: 'Run discipline',
    description:
      'tool-call replies a coder step may make before it must answer in text (tools protocol); recorded per task',
    default: code(DEFAULT_CODER_TOOL_TURNS),
  },
  RUNLEDGER_BODY_LIMIT: { group: 'Server', description: 'largest request body' },
  RUNLEDGER_CORS_ORIGIN: { group: 'Server', description: 'the allowed CORS origin' },
  RUNLEDGER_RATE_LIMIT: {
    group: 'Server',
    description: 'requests per minute per bearer token; `0` turns rate limiting off',
  },
  RUNLEDGER_WS_HEARTBEAT_MS: {
    group: 'Server',
    description: 'WebSocket ping interval; a peer that misses one pong is dropped',
  },
  RUNLEDGER_WS_MAX_BUFFER: {
    group: 'Server',
    description: 'bytes a WebSocket client may have unsent before it is dropped as a slow consumer',
  },
  RUNLEDGER_BUDGET_DEFAULTS: {
    group: 'Run discipline',
    description:
      "JSON budgets with the API's `budgets` keys (`max_rounds`, `max_tool_calls`, `max_model_calls`, `max_failures`, `max_tokens`, `max_cost_usd`, `timeout_ms`): a task's defaults",
    default: inlineJson(DEFAULT_BUDGETS),
  },
  RUNLEDGER_BUDGET_MAXIMUMS: {
    group: 'Run discipline',
    description: 'JSON budgets: caps on what a task may ask for',
    default: inlineJson(DEFAULT_BUDGET_MAXIMUMS),
  },
  RUNLEDGER_PRICE_TABLE: {
    group: 'Models',
    description:
      'JSON `{"<model>": {"input_per_mtok", "output_per_mtok"}, "*": ...}` in USD per million tokens: every model call is priced when recorded and counts in the task\'s `usage.cost_usd` and `max_cost_usd`',
  },
  RUNLEDGER_CHARS_PER_TOKEN: {
    group: 'Models',
    description: 'characters per token when a provider reports no usage',
    default: code(DEFAULT_CHARS_PER_TOKEN),
  },
  RUNLEDGER_CONTEXT_WINDOW_TOKENS: {
    group: 'Models',
    description:
      'the context the server gives the model; the prompt budget is (window - completion) x (1 - margin) tokens, `CONTEXT_BUILT.budget_tokens`',
    default: code(prompt.contextWindowTokens),
  },
  RUNLEDGER_MAX_COMPLETION_TOKENS: {
    group: 'Models',
    description: 'completion tokens reserved out of the context window',
    default: code(prompt.maxTokens),
  },
  RUNLEDGER_PROMPT_SAFETY_MARGIN: {
    group: 'Models',
    description: 'share of the prompt budget kept free for estimation error',
    default: code(prompt.safetyMargin),
  },
  RUNLEDGER_MODEL_RETRIES: {
    group: 'Run discipline',
    description: 'retries of a failed model call',
    default: code(retry.modelRetries),
  },
  RUNLEDGER_TOOL_RETRIES: {
    group: 'Run discipline',
    description: 'retries of a broken idempotent tool call',
    default: code(retry.toolRetries),
  },
  RUNLEDGER_RETRY_BASE_MS: {
    group: 'Run discipline',
    description: 'backoff before the first retry (ms); it doubles with each retry, with jitter',
    default: code(retry.baseDelayMs),
  },
  RUNLEDGER_RETRY_MAX_MS: {
    group: 'Run discipline',
    description: 'longest retry backoff (ms)',
    default: code(retry.maxDelayMs),
  },
  RUNLEDGER_RETRY_AFTER_MAX_MS: {
    group: 'Run discipline',
    description: "a provider's Retry-After longer than this (ms) is not waited for: fall back or stop",
    default: code(retry.maxRetryAfterMs),
  },
  RUNLEDGER_CIRCUIT_BREAKER_THRESHOLD: {
    group: 'Run discipline',
    description: 'consecutive breakages of one tool in a task that open its circuit',
    default: code(DEFAULT_DISCIPLINE_SETTINGS.circuitBreakerThreshold),
  },
  RUNLEDGER_TOOL_TIMEOUT_CAP_MS: {
    group: 'Run discipline',
    description: 'upper bound of the adaptive per-signature tool timeout (ms)',
    default: code(DEFAULT_DISCIPLINE_SETTINGS.toolTimeoutCapMs),
  },
  RUNLEDGER_MODEL_TIMEOUT_MS: {
    group: 'Run discipline',
    description: 'time limit of one model call (ms)',
    default: code(DEFAULT_DISCIPLINE_SETTINGS.modelTimeoutMs),
  },
  RUNLEDGER_STREAM_IDLE_TIMEOUT_MS: {
    group: 'Run discipline',
    description: 'a model stream silent this long (ms) is a timeout',
    default: code(DEFAULT_DISCIPLINE_SETTINGS.streamIdleTimeoutMs),
  },
  RUNLEDGER_COMPLETION_MAX_MISSES: {
    group: 'Run discipline',
    description:
      'consecutive directive-less orchestrator answers before the task stops with `missing_completion_signal`',
    default: code(DEFAULT_DISCIPLINE_SETTINGS.completionMaxMisses),
  },
  RUNLEDGER_REPEAT_THRESHOLD: {
    group: 'Run discipline',
    description:
      'repeats of an earlier round in a row that earn a reminder (one more stops with `repeat_cycle`)',
    default: code(DEFAULT_DISCIPLINE_SETTINGS.repeatThreshold),
  },
  RUNLEDGER_STEP_CONCURRENCY: {
    group: 'Run discipline',
    description:
      "plan steps of one task run at once (agent steps too: a plan's children run side by side up to it)",
  },
  RUNLEDGER_AGENTS: {
    group: 'Delegation',
    description:
      'JSON `[{"name", "description", "models"?: {"<role>": "<model>"}, "tools"?: [names], "instructions"?, "evaluator"?, "round_policy"?: "on" | "off", "tool_budgets"?: {"<tool>": {"max_calls_per_task"?, "only_if_previous_empty"?}}}]`: agents a task may delegate to, beside the built-in `coder` (an entry named `coder` replaces it); see [models.md](models.md#delegation-and-agents). A remote agent is `{"name", "a2a": {"url" | "card_url", "headers_from"?: "env:VAR" | "file:path"}, "timeout_ms"?}`: delegating to it sends an A2A message (see [a2a.md](a2a.md#remote-agents-as-delegates))',
  },
  RUNLEDGER_MAX_DELEGATION_DEPTH: {
    group: 'Delegation',
    description: 'how many delegations below the submitted task a task may be',
  },
  RUNLEDGER_PUBLIC_URL: {
    group: 'A2A and outbound deliveries',
    description:
      "the address other agents reach this service at: the A2A agent card's interfaces name it (see [a2a.md](a2a.md))",
    default: '`http://<HOST>:<PORT>` as the server listens',
  },
  RUNLEDGER_OUTBOUND_SIGNING_KEY: {
    group: 'A2A and outbound deliveries',
    description:
      'the HMAC-SHA256 key outbound deliveries (A2A push notifications, task callbacks) are signed with (`Runledger-Signature` header)',
    default: '`outbound-signing.key` in the data folder, generated on the first boot (mode 0600)',
  },
  RUNLEDGER_HOOKS: {
    group: 'A2A and outbound deliveries',
    description:
      'JSON `[{"name", "secret_env", "signature"?: "runledger" | "github" | "stripe" | {"header", "algorithm"?, "encoding"?, "prefix"?}, "tolerance_s"?, "delivery_header"?, "when"?, "task"?: {"input", "session_id"?, "budgets"?, "on_busy"?} | "signal"?: {"task_id", "name", "payload"?}}]`: inbound webhooks at `POST /hooks/<name>`, verified with the HMAC secret the variable `secret_env` holds, each delivery (by its id) one task or one signal (see [time.md](time.md#webhooks))',
  },
  RUNLEDGER_OUTBOUND_MAX_ATTEMPTS: {
    group: 'A2A and outbound deliveries',
    description:
      'attempts of one outbound delivery before it is given up (recorded as DELIVERY_FAILED without a retry)',
  },
  RUNLEDGER_OUTBOUND_BACKOFF_MS: {
    group: 'A2A and outbound deliveries',
    description: "the first retry's delay (ms); each next one doubles",
  },
  RUNLEDGER_OUTBOUND_BACKOFF_MAX_MS: {
    group: 'A2A and outbound deliveries',
    description: 'the longest delay between two attempts (ms)',
  },
  RUNLEDGER_OUTBOUND_TIMEOUT_MS: {
    group: 'A2A and outbound deliveries',
    description: "one delivery request's time limit (ms); an attempt's claim lasts three times as long",
  },
  RUNLEDGER_BUNDLE_REDACT: {
    group: 'Logs and traces',
    description:
      'JSON array of regular expressions; every match is masked in an incident bundle, besides the built-in credential shapes and the known secrets (see [bundles.md](bundles.md))',
  },
  RUNLEDGER_CHECKPOINTS: {
    group: 'Checkpoints and leases',
    description:
      "`on`: a running task saves a checkpoint (its state's snapshot, with `CHECKPOINT_SAVED` in the same append) after a round or plan step, when it starts waiting for a person, and every `RUNLEDGER_CHECKPOINT_EVERY_EVENTS` events; resume and task reads load the latest snapshot plus the events after it. `off`: none",
  },
  RUNLEDGER_RETENTION: {
    group: 'Storage',
    description:
      '`off`: `runledger archive` needs `--older-than`. A duration (`7d`, `12h`): the server\'s sweeper (every `RUNLEDGER_RETENTION_SWEEP_MS`) and `runledger archive` archive finished task trees that ended that long ago. A JSON list of rules `[{"older_than":"30d","status":["failed"]},{"older_than":"7d"}]` (also `session_id`, `agent`): the first rule that covers a task decides; a task no rule covers stays. See [retention.md](retention.md)',
  },
  RUNLEDGER_RETENTION_CATALOG_AFTER: {
    group: 'Storage',
    description:
      "with a policy set: tasks archived this long ago (`30d` by default) leave the live database too: their summary rows and archive records move into the archive's catalog (SQLite: `<db>.archive/catalog.db`; PostgreSQL: tables `catalog_tasks` and `catalog_archived_tasks`), so the live database stops growing. Every reader still finds them. `off`: archived tasks keep their records live. See [retention.md](retention.md#the-catalog)",
  },
  RUNLEDGER_ERASURE: {
    group: 'Storage',
    description:
      "`on`: the personal fields of every new event (input, answers, tool arguments and outputs, model replies...) and the read models' copies of them (task rows' input, result...; memory entries' text, metadata and vector; checkpoints) are stored sealed under their task's data key (one per task stream; AES-256-GCM; SQLite: keys in `<db>.keys`, PostgreSQL: tables `stream_keys` and `data_keys`), so erasing a session or one task tree (`POST /sessions/:id/erase`, `POST /tasks/:id/erase`, `runledger erase [--task]`) destroys its keys and with them the content, in the database, its archives and its backups; a task's memory recall, memory tools and deduplication then reach only its own session's entries and those written for nobody, so no session's content is copied into another's events. `off` (default): stored in clear, memory shared across sessions; an erasure then only hides the content from readers. See [retention.md](retention.md#erasure)",
  },
  RUNLEDGER_ERASURE_KEY_FILE: {
    group: 'Storage',
    description:
      'a file holding the key-encryption key: 32 bytes, raw or base64 (`openssl rand -base64 32 > kek; chmod 600 kek`). Every data key in `<db>.keys` is then stored wrapped with it (AES-256-GCM), so the key file alone gives nobody the content; a key file of raw keys is wrapped when first opened with it, and a key file written with one refuses to open without it (or with another): the server does not start and every CLI command exits 1 naming the variable. Rotation is not built. SQLite only: with PostgreSQL the boot stops. See [retention.md](retention.md#the-key-encryption-key)',
  },
  RUNLEDGER_RETENTION_BATCH: {
    group: 'Storage',
    description:
      'tasks (with their children) per archive segment at most: what one short write transaction moves',
  },
  RUNLEDGER_RETENTION_SWEEP_MS: {
    group: 'Storage',
    description:
      'with a policy set: how often the server archives what the policy lets go, in batches with a rest between them (on PostgreSQL one instance at a time, under the archive lease). `0`: the server never does; `runledger archive` (cron) still does',
  },
  RUNLEDGER_RETENTION_REST_MS: {
    group: 'Storage',
    description:
      "the sweeper's least rest between two archive batches' write transactions (and two steps of giving freed pages back to the SQLite file); a rest lasts at least four times what the step before it held (on SQLite, where the archiver runs in a worker thread, its transaction; elsewhere the whole batch), so the sweeper holds the writer at most a fifth of the time: appends run meanwhile",
  },
  RUNLEDGER_RETENTION_SWEEP_BATCH: {
    group: 'Storage',
    description:
      "tasks (with their children) per batch of the server's sweeper: small, so no batch holds the writer for long; `runledger archive` uses `RUNLEDGER_RETENTION_BATCH`",
  },
  RUNLEDGER_CHECKPOINT_EVERY_EVENTS: {
    group: 'Checkpoints and leases',
    description: 'events after which a checkpoint is saved even without a milestone',
  },
  RUNLEDGER_LEASE_RENEW_MS: {
    group: 'Checkpoints and leases',
    description:
      'how often a process renews the leases of the tasks it runs and looks for tasks nobody runs (see [leases.md](leases.md))',
  },
  RUNLEDGER_LEASE_TTL_MS: {
    group: 'Checkpoints and leases',
    description: 'how long a lease lasts unrenewed; must be longer than the renewal interval',
  },
  RUNLEDGER_CRITIC: {
    group: 'Critic and memory',
    description:
      '`auto`: the critic model when `RUNLEDGER_MODEL_CRITIC` (or a scripted critic) is set, else the heuristic critic; `model`, `heuristic`, `off`',
  },
  RUNLEDGER_CRITIC_TIMEOUT_MS: { group: 'Critic and memory', description: "the critic's time limit (ms)" },
  RUNLEDGER_MEMORY: { group: 'Critic and memory', description: 'the vector memory, `on` or `off`' },
  RUNLEDGER_EMBEDDER: {
    group: 'Critic and memory',
    description: '`hash`: local feature hashing, no model; `openai`: `OPENAI_BASE_URL` `/embeddings`',
  },
  RUNLEDGER_EMBEDDING_MODEL: {
    group: 'Critic and memory',
    description: 'the embedding model (required with `RUNLEDGER_EMBEDDER=openai`)',
  },
  RUNLEDGER_EMBEDDING_DIM: { group: 'Critic and memory', description: 'embedding dimensions' },
  RUNLEDGER_MEMORY_INDEX: {
    group: 'Critic and memory',
    description:
      'the vector index file; when missing or stale at boot a worker thread rebuilds it from the stored vectors while recall scans them exactly, and `/health` reports `memory.index: "rebuilding"`. Never share one file between instances',
    default: '`<db>.memory.hnsw` beside the SQLite file',
  },
  RUNLEDGER_MEMORY_MIN_WEIGHT: {
    group: 'Critic and memory',
    description: 'weight below which an outcome is not stored',
    default: code(DEFAULT_MEMORY_POLICY.min_weight),
  },
  RUNLEDGER_MEMORY_DEDUP_THRESHOLD: {
    group: 'Critic and memory',
    description: 'similarity above which a write reinforces an existing entry instead of adding one',
    default: code(DEFAULT_MEMORY_POLICY.dedup_threshold),
  },
  LOG_LEVEL: { group: 'Logs and traces', description: 'pino level of the JSON log on stdout' },
  OTEL_EXPORTER_OTLP_ENDPOINT: {
    group: 'Logs and traces',
    description:
      'OTLP/HTTP base URL, e.g. `http://localhost:4318`; traces go to `<endpoint>/v1/traces`. Unset (and no traces endpoint): no tracing at all (see [telemetry.md](telemetry.md))',
  },
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: {
    group: 'Logs and traces',
    description: 'the full traces URL, used as is; wins over the base endpoint',
  },
  OTEL_SERVICE_NAME: { group: 'Logs and traces', description: "the resource's `service.name`" },
  OTEL_SDK_DISABLED: {
    group: 'Logs and traces',
    description: '`true` keeps tracing off even with an endpoint',
    default: '`false`',
  },
  OTEL_BSP_SCHEDULE_DELAY: {
    group: 'Logs and traces',
    description: 'ms between two exports of finished spans',
  },
  OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: {
    group: 'Logs and traces',
    description:
      '`true`, `span_only` or `span_and_event` put the task input and result, model completions, tool arguments and results on the spans (case-insensitive)',
    default: '`false`',
  },
};

const HEADER = `# Configuration

<!-- Generated by \`npm run docs:config\` from apps/controller/src/config.ts and
apps/controller/src/docs/config-reference.ts: edit those, not this file. -->

Read once at boot from the environment, and from an optional JSON file named by \`RUNLEDGER_CONFIG\` that
may hold any of these keys (the environment wins). A bad value stops the boot with a message naming the
variable. "values" is what the schema accepts; a JSON variable takes JSON text (or JSON in the file).
`;

/** "values": what the schema accepts, from its JSON Schema (the input side, before coercion). */
function valuesOf(schema: Record<string, unknown>): string {
  if (Array.isArray(schema.enum)) return schema.enum.map((v) => `\`${String(v)}\``).join(', ');
  const range = (kind: string) => {
    const lower =
      schema.exclusiveMinimum !== undefined
        ? `> ${String(schema.exclusiveMinimum)}`
        : schema.minimum !== undefined
          ? String(schema.minimum)
          : undefined;
    const upper = schema.maximum !== undefined ? String(schema.maximum) : undefined;
    if (lower?.startsWith('>')) return `${kind} ${lower}${upper ? `, <= ${upper}` : ''}`;
    return lower !== undefined && upper !== undefined ? `${kind} ${lower} to ${upper}` : kind;
  };
  switch (schema.type) {
    case 'integer':
      return range('integer');
    case 'number':
      return range('number');
    case 'array':
      return 'JSON array';
    case 'object':
      return 'JSON object';
    case 'string':
      if (schema.format === 'uri') return 'URL';
      if (typeof schema.pattern === 'string') return `text matching \`${schema.pattern}\``;
      if (typeof schema.minLength === 'number' && schema.minLength > 1)
        return `${schema.minLength}+ characters`;
      return 'text';
    default:
      return 'JSON';
  }
}

const cell = (text: string) => text.replace(/\|/g, '\\|');

function defaultOf(key: ConfigKey, schema: Record<string, unknown>): string {
  if (schema.default !== undefined) return `\`${String(schema.default)}\``;
  return CONFIG_REFERENCE[key].default ?? '';
}

/** docs/configuration.md: the variables of ConfigSchema by group, in the schema's order within each. */
export function renderConfigReference(): string {
  const keys = Object.keys(ConfigSchema.shape) as ConfigKey[];
  const sections = GROUPS.flatMap((group) => {
    const rows = keys
      .filter((key) => CONFIG_REFERENCE[key].group === group)
      .map((key) => {
        const schema = z.toJSONSchema(ConfigSchema.shape[key], {
          io: 'input',
          unrepresentable: 'any',
        }) as Record<string, unknown>;
        const cells = [
          `\`${key}\``,
          defaultOf(key, schema),
          valuesOf(schema),
          CONFIG_REFERENCE[key].description,
        ];
        return `| ${cells.map(cell).join(' | ')} |`;
      });
    if (rows.length === 0) return [];
    return [
      `## ${group}\n\n| variable | default | values | meaning |\n|---|---|---|---|\n${rows.join('\n')}\n`,
    ];
  });
  return [HEADER, ...sections].join('\n');
}
