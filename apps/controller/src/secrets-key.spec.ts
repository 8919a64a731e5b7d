import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadOrCreateSecretsKey, secretsKeyFile } from './secrets-key';

describe('secrets key beside the database', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'rl-secrets-key-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('is created once (mode 0600) and the same key is read on the next boot', () => {
    const file = secretsKeyFile(dir);
    expect(file).toBe(join(dir, 'secrets.key'));
    const first = loadOrCreateSecretsKey(file);
    expect(first).toHaveLength(32);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(loadOrCreateSecretsKey(file).equals(first)).toBe(true);
    expect(readFileSync(file, 'utf8')).not.toContain(first.toString('hex'));
  });

  it('a damaged key file stops the boot with its name', () => {
    const file = join(dir, 'secrets.key');
    writeFileSync(file, 'short\n');
    expect(() => loadOrCreateSecretsKey(file)).toThrow(`${file}: secrets key too short`);
  });
});
