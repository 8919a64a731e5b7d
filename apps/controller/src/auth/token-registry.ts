import { createHash, timingSafeEqual } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { ConfigError } from '@runledger/contracts';
import { AppConfig, dataDirOf } from '../config';
import { readOrCreateRandomFile } from '../random-file';
import { Principal, Scope } from './principal';

const TokensFile = z
  .array(
    z
      .object({
        name: z.string().min(1).max(100),
        token: z.string().min(16).max(1000),
        scopes: z.array(Scope).min(1),
      })
      .strict(),
  )
  .min(1);

interface StoredToken {
  principal: Principal;
  digest: Buffer;
}

const digest = (token: string): Buffer => createHash('sha256').update(token, 'utf8').digest();

/**
 * The bearer tokens this server accepts. Tokens are kept only as SHA-256
 * digests and compared in constant time; a lookup checks every token so the
 * time taken does not tell which one nearly matched.
 */
export class TokenRegistry {
  private readonly tokens: StoredToken[];

  constructor(entries: ReadonlyArray<{ name: string; token: string; scopes: readonly Scope[] }>) {
    this.tokens = entries.map((e) => ({
      principal: { name: e.name, scopes: [...e.scopes] },
      digest: digest(e.token),
    }));
  }

  authenticate(token: string): Principal | null {
    const candidate = digest(token);
    let found: Principal | null = null;
    for (const t of this.tokens) {
      if (timingSafeEqual(t.digest, candidate) && found === null) found = t.principal;
    }
    return found;
  }
}

export interface ResolvedTokens {
  registry: TokenRegistry;
  /** set when this boot generated (or reused a generated) admin token, so main can print the dashboard address */
  generatedAdminToken: { token: string; file: string; created: boolean } | null;
}

/** Where a generated admin token lives: in the data folder (beside a SQLite file). */
export const adminTokenFile = (config: AppConfig): string => join(dataDirOf(config), 'admin.token');

/**
 * RUNLEDGER_ADMIN_TOKEN and RUNLEDGER_TOKENS_FILE, or, with neither, a random
 * admin token written once to `admin.token` (mode 0600) beside the database.
 */
export function resolveTokens(config: AppConfig): ResolvedTokens {
  const entries: Array<{ name: string; token: string; scopes: Scope[] }> = [];
  if (config.RUNLEDGER_ADMIN_TOKEN)
    entries.push({ name: 'admin', token: config.RUNLEDGER_ADMIN_TOKEN, scopes: ['admin'] });
  if (config.RUNLEDGER_TOKENS_FILE) entries.push(...readTokensFile(config.RUNLEDGER_TOKENS_FILE));
  if (entries.length > 0) return { registry: new TokenRegistry(entries), generatedAdminToken: null };

  const file = adminTokenFile(config);
  const { value: token, created } = readOrCreateRandomFile(file, 32);
  if (token.length < 16)
    throw new ConfigError(`${file}: admin token too short; delete the file to generate a new one`);
  return {
    registry: new TokenRegistry([{ name: 'admin', token, scopes: ['admin'] }]),
    generatedAdminToken: { token, file, created },
  };
}

export function readTokensFile(path: string): Array<{ name: string; token: string; scopes: Scope[] }> {
  if (!existsSync(path)) throw new ConfigError(`RUNLEDGER_TOKENS_FILE: file not found: ${path}`);
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new ConfigError(`RUNLEDGER_TOKENS_FILE: not valid JSON (${(e as Error).message})`);
  }
  const parsed = TokensFile.safeParse(raw);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`RUNLEDGER_TOKENS_FILE: ${lines.join('; ')}`);
  }
  return parsed.data;
}

/** The token of an `Authorization: Bearer <token>` header, or null. */
export function bearerToken(header: string | string[] | undefined): string | null {
  if (typeof header !== 'string') return null;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m ? m[1] : null;
}
