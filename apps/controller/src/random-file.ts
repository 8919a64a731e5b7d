import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { dirname } from 'node:path';
import { ConfigError } from '@runledger/contracts';

/**
 * A random value (`bytes` random bytes, base64url) kept in `file` with mode 0600: written on the
 * first boot, read on every later one. Two processes booting at once both end up with the one
 * written first (the write is exclusive). The file's folder (the data folder) is made when missing;
 * where it cannot be, or the file cannot be kept there, the ConfigError names the file and why.
 */
export function readOrCreateRandomFile(file: string, bytes: number): { value: string; created: boolean } {
  try {
    mkdirSync(dirname(file), { recursive: true });
    let created = true;
    try {
      writeFileSync(file, `${randomBytes(bytes).toString('base64url')}\n`, { mode: 0o600, flag: 'wx' });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      created = false;
    }
    chmodSync(file, 0o600);
    return { value: readFileSync(file, 'utf8').trim(), created };
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (!err.code) throw e;
    throw new ConfigError(
      `cannot keep ${file}: ${err.message}; set RUNLEDGER_DATA_DIR to a folder this process may create and write`,
    );
  }
}
