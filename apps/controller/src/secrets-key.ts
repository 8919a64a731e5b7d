import { join } from 'node:path';
import { ConfigError } from '@runledger/contracts';
import { readOrCreateRandomFile } from './random-file';

/** Where the key of the secrets' fingerprints lives: in the data folder (beside a SQLite file), like admin.token. */
export const secretsKeyFile = (dataDir: string): string => join(dataDir, 'secrets.key');

const KEY_BYTES = 32;

/**
 * The key the runtime hashes provided secrets with (SECRET_PROVIDED records the
 * hash, never the value), written once (mode 0600) and read on every boot: a
 * restarted process recognises the secrets of the log only with the same key.
 * Two processes booting at once both end up with the one written first.
 */
export function loadOrCreateSecretsKey(file: string): Buffer {
  const key = Buffer.from(readOrCreateRandomFile(file, KEY_BYTES).value, 'base64url');
  if (key.length < KEY_BYTES)
    throw new ConfigError(`${file}: secrets key too short; delete the file to generate a new one`);
  return key;
}
