import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';

/**
 * A random value (`bytes` random bytes, base64url) kept in `file` with mode 0600: written on the
 * first boot, read on every later one. Two processes booting at once both end up with the one
 * written first (the write is exclusive).
 */
export function readOrCreateRandomFile(file: string, bytes: number): { value: string; created: boolean } {
  let created = true;
  try {
    writeFileSync(file, `${randomBytes(bytes).toString('base64url')}\n`, { mode: 0o600, flag: 'wx' });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    created = false;
  }
  chmodSync(file, 0o600);
  return { value: readFileSync(file, 'utf8').trim(), created };
}
