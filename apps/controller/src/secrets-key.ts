import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { dirname, join, resolve } from 'node:path';
import { ConfigError } from '@runledger/contracts';

/** Where the key of the secrets' fingerprints lives: beside the database, like admin.token. */
export const secretsKeyFile = (dbPath: string): string => join(dirname(resolve(dbPath)), 'secrets.key');

const KEY_BYTES = 32;

/**
 * The key the runtime hashes provided secrets with (SECRET_PROVIDED records the
 * hash, never the value), written once (mode 0600) and read on every boot: a
 * restarted process recognises the secrets of the log only with the same key.
 * Two processes booting at once both end up with the one written first.
 */
export function loadOrCreateSecretsKey(file: string): Buffer {
  try {
    writeFileSync(file, `${randomBytes(KEY_BYTES).toString('base64url')}\n`, { mode: 0o600, flag: 'wx' });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  }
  chmodSync(file, 0o600);
  const key = Buffer.from(readFileSync(file, 'utf8').trim(), 'base64url');
  if (key.length < KEY_BYTES)
    throw new ConfigError(`${file}: secrets key too short; delete the file to generate a new one`);
  return key;
}
