import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { INestApplicationContext } from '@nestjs/common';
import { ValidationError } from '@runledger/contracts';
import { EventStore, isPostgresUrl } from '@runledger/event-store';
import {
  BundleRuntime,
  DEFAULT_CODER_TOOL_TURNS,
  IncidentBundle,
  SecretVault,
  SessionSecrets,
  buildBundle,
  parseBundle,
  taskTreeLog,
} from '@runledger/runtime';
import { ToolRegistry, mcpEnvReferences } from '@runledger/tools';
import { adminTokenFile, readTokensFile } from '../auth/token-registry';
import { AppConfig, dataDirOf, providerKeyNames } from '../config';
import { outboundKeyFile } from '../outbound/outbound.module';
import { loadOrCreateSecretsKey, secretsKeyFile } from '../secrets-key';

/**
 * Credential shapes masked in every bundle, configured patterns or not: provider API keys, GitHub and
 * Slack tokens, AWS access key ids, bearer tokens, PEM private keys.
 */
export const BUILT_IN_BUNDLE_PATTERNS: readonly string[] = [
  'sk-[A-Za-z0-9_-]{20,}',
  'gh[pousr]_[A-Za-z0-9]{30,}',
  'github_pat_[A-Za-z0-9_]{30,}',
  'xox[abprs]-[A-Za-z0-9-]{10,}',
  'AKIA[0-9A-Z]{16}',
  '[Bb]earer [A-Za-z0-9._~+/-]{16,}=*',
  '-----BEGIN [A-Z ]*PRIVATE KEY-----[\\s\\S]*?-----END [A-Z ]*PRIVATE KEY-----',
];

const readIfThere = (file: string): string | null =>
  existsSync(file) ? readFileSync(file, 'utf8').trim() : null;

/**
 * What this installation holds as secret, read before anything runs (the model clients drop the
 * provider keys from the environment once built): the provider keys, the values MCP servers are given,
 * the API tokens, admin.token and the outbound signing key.
 */
export function installationSecrets(config: AppConfig, env: NodeJS.ProcessEnv): string[] {
  const fromEnv = [
    ...providerKeyNames(config),
    ...mcpEnvReferences(config.RUNLEDGER_MCP_SERVERS ?? []).map((r) => r.name),
  ].map((name) => env[name]);
  const tokens = config.RUNLEDGER_TOKENS_FILE ? readTokensFile(config.RUNLEDGER_TOKENS_FILE) : [];
  return [
    ...fromEnv,
    config.RUNLEDGER_ADMIN_TOKEN,
    ...tokens.map((t) => t.token),
    readIfThere(adminTokenFile(config)),
    config.RUNLEDGER_OUTBOUND_SIGNING_KEY ?? readIfThere(outboundKeyFile(dataDirOf(config))),
  ].filter((v): v is string => typeof v === 'string' && v.length > 0);
}

/** The patterns a bundle is scrubbed with: the built-in ones, RUNLEDGER_BUNDLE_REDACT's, then the command line's. */
export function bundlePatterns(config: AppConfig, given: readonly string[]): RegExp[] {
  return [...BUILT_IN_BUNDLE_PATTERNS, ...(config.RUNLEDGER_BUNDLE_REDACT ?? []), ...given].map((source) => {
    try {
      if (!source) throw new Error('empty');
      return new RegExp(source, 'g');
    } catch (e) {
      throw new ValidationError(
        `--redact: not a regular expression: ${JSON.stringify(source)} (${(e as Error).message})`,
      );
    }
  });
}

/** Refused before the runtime boots, which would create a database where there is none. */
export function checkBundleTarget(config: AppConfig, file: string, cwd: string): string {
  const target = resolve(cwd, file);
  if (!isPostgresUrl(config.RUNLEDGER_DB) && !existsSync(resolve(cwd, config.RUNLEDGER_DB)))
    throw new ValidationError(`bundle: no database at ${resolve(cwd, config.RUNLEDGER_DB)}`);
  if (existsSync(target)) throw new ValidationError(`bundle: ${target} exists; name a new file`);
  return target;
}

/** The runtime settings a replay elsewhere needs, as this process has them. */
function bundleRuntime(app: INestApplicationContext, config: AppConfig): BundleRuntime {
  return {
    tools: app.get(ToolRegistry).list(),
    agents: config.RUNLEDGER_AGENTS ?? [],
    max_delegation_depth: config.RUNLEDGER_MAX_DELEGATION_DEPTH,
    step_concurrency: config.RUNLEDGER_STEP_CONCURRENCY,
    model_timeout_ms: config.RUNLEDGER_MODEL_TIMEOUT_MS ?? null,
    coder_tool_turns: config.RUNLEDGER_CODER_TOOL_TURNS ?? DEFAULT_CODER_TOOL_TURNS,
    max_rounds: config.RUNLEDGER_MAX_ROUNDS,
  };
}

export interface BundleWritten {
  file: string;
  bytes: number;
  tasks: number;
  events: number;
  scrubbed: IncidentBundle['scrubbed'];
}

/**
 * Writes the incident bundle of `taskId`'s tree to `target` (under a temporary name, then renamed:
 * the file is whole or absent). Secrets: `secrets` (the installation's), the vault's values, and
 * whatever the session redaction recognises with the database's secrets.key.
 */
export async function writeBundle(
  app: INestApplicationContext,
  config: AppConfig,
  o: { taskId: string; target: string; secrets: readonly string[]; patterns: RegExp[] },
): Promise<BundleWritten> {
  const store = app.get(EventStore);
  const tree = await taskTreeLog(store, o.taskId);
  const keyFile = secretsKeyFile(dataDirOf(config));
  const sessionSecrets = existsSync(keyFile) ? new SessionSecrets(loadOrCreateSecretsKey(keyFile)) : null;
  await sessionSecrets?.load(() => store.readAll({ types: ['SECRET_PROVIDED'] }));
  const { bundle, text } = buildBundle(
    tree,
    bundleRuntime(app, config),
    {
      secrets: [...o.secrets, ...app.get(SecretVault).held()],
      patterns: o.patterns,
      sessionSecrets,
    },
    new Date(),
  );
  const partial = `${o.target}.partial-${process.pid}`;
  try {
    writeFileSync(partial, text, { mode: 0o600, flag: 'wx' });
    renameSync(partial, o.target);
  } catch (e) {
    rmSync(partial, { force: true });
    throw e;
  }
  return {
    file: o.target,
    bytes: Buffer.byteLength(text),
    tasks: bundle.tasks.length,
    events: bundle.tasks.reduce((n, t) => n + t.events.length, 0),
    scrubbed: bundle.scrubbed,
  };
}

/** A bundle file read and checked; ValidationError naming the file when it is missing or not a bundle. */
export function readBundleFile(file: string, cwd: string): IncidentBundle {
  const path = resolve(cwd, file);
  if (!existsSync(path)) throw new ValidationError(`replay --bundle: no file at ${path}`);
  return parseBundle(readFileSync(path, 'utf8'));
}
