import { existsSync, readFileSync } from 'node:fs';
import { z } from 'zod';
import { ConfigError } from '@runledger/contracts';

const intFromEnv = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

/**
 * Everything the service reads from its environment, parsed once at boot.
 * A bad value stops the boot with a message naming the variable.
 */
export const ConfigSchema = z.object({
  PORT: intFromEnv(0, 65535).default(3000),
  HOST: z.string().min(1).default('127.0.0.1'),
  RUNLEDGER_DB: z.string().min(1).default('./data/runledger.db'),
  RUNLEDGER_SQLITE_SYNCHRONOUS: z.enum(['OFF', 'NORMAL', 'FULL', 'EXTRA']).default('FULL'),
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
  RUNLEDGER_SANDBOX: z.enum(['auto', 'bwrap', 'process']).default('auto'),
  RUNLEDGER_PLUGINS: z.string().optional(),
  RUNLEDGER_CONCURRENCY: intFromEnv(1, 256).default(4),
  RUNLEDGER_MAX_ROUNDS: intFromEnv(1, 1000).default(10),
  RUNLEDGER_BODY_LIMIT: z.string().regex(/^\d+(b|kb|mb)?$/i).default('1mb'),
  RUNLEDGER_CORS_ORIGIN: z.string().optional(),
  /** requests per minute per bearer token; 0 turns rate limiting off */
  RUNLEDGER_RATE_LIMIT: intFromEnv(0, 10_000_000).default(1200),
  /** WebSocket ping interval; a peer that misses one pong is dropped */
  RUNLEDGER_WS_HEARTBEAT_MS: intFromEnv(50, 3_600_000).default(30_000),
  /** bytes a WebSocket client may have unsent before it is disconnected as a slow consumer */
  RUNLEDGER_WS_MAX_BUFFER: intFromEnv(1024, 1_073_741_824).default(8 * 1024 * 1024),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});
export type AppConfig = z.infer<typeof ConfigSchema>;

/** Injection token for the parsed config. */
export const APP_CONFIG = Symbol('APP_CONFIG');

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
  return parsed.data;
}
