import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@runledger/contracts';
import { loadConfig } from '../config';
import { TokenRegistry, bearerToken, resolveTokens } from './token-registry';

describe('TokenRegistry', () => {
  const sut = new TokenRegistry([
    { name: 'ops', token: 'ops-token-0123456789abcdef', scopes: ['admin'] },
    { name: 'ci', token: 'ci-token-0123456789abcdef', scopes: ['tasks:read', 'tasks:write'] },
  ]);

  it('returns the principal of a known token, never the token', () => {
    expect(sut.authenticate('ci-token-0123456789abcdef')).toEqual({
      name: 'ci',
      scopes: ['tasks:read', 'tasks:write'],
    });
    expect(sut.authenticate('ops-token-0123456789abcdef')).toEqual({ name: 'ops', scopes: ['admin'] });
  });

  it.each(['', 'ci-token-0123456789abcde', 'ci-token-0123456789abcdef ', 'CI-TOKEN-0123456789ABCDEF'])(
    'rejects %j',
    (t) => {
      expect(sut.authenticate(t)).toBeNull();
    },
  );

  it('parses only Bearer authorization headers', () => {
    expect(bearerToken('Bearer abc')).toBe('abc');
    expect(bearerToken('bearer abc')).toBe('abc');
    expect(bearerToken('Basic abc')).toBeNull();
    expect(bearerToken('Bearer a b')).toBeNull();
    expect(bearerToken(undefined)).toBeNull();
    expect(bearerToken(['Bearer a'])).toBeNull();
  });
});

describe('resolveTokens', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'rl-tokens-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('generates an admin token beside the DB with mode 0600 once, then reuses it', () => {
    const config = loadConfig({ RUNLEDGER_DB: join(dir, 'db', 'r.db') });
    mkdirSync(join(dir, 'db'));
    const first = resolveTokens(config);
    expect(first.generatedAdminToken).toMatchObject({ file: join(dir, 'db', 'admin.token'), created: true });
    expect(statSync(join(dir, 'db', 'admin.token')).mode & 0o777).toBe(0o600);
    const token = readFileSync(join(dir, 'db', 'admin.token'), 'utf8').trim();
    expect(first.registry.authenticate(token)).toEqual({ name: 'admin', scopes: ['admin'] });
    const second = resolveTokens(config);
    expect(second.generatedAdminToken).toMatchObject({ token, created: false });
  });

  it('uses RUNLEDGER_ADMIN_TOKEN and RUNLEDGER_TOKENS_FILE and generates nothing', () => {
    const file = join(dir, 'tokens.json');
    writeFileSync(
      file,
      JSON.stringify([{ name: 'reader', token: 'reader-0123456789abcdef', scopes: ['tasks:read'] }]),
    );
    const sut = resolveTokens(
      loadConfig({
        RUNLEDGER_DB: join(dir, 'r.db'),
        RUNLEDGER_ADMIN_TOKEN: 'admin-0123456789abcdef',
        RUNLEDGER_TOKENS_FILE: file,
      }),
    );
    expect(sut.generatedAdminToken).toBeNull();
    expect(sut.registry.authenticate('reader-0123456789abcdef')).toEqual({
      name: 'reader',
      scopes: ['tasks:read'],
    });
    expect(sut.registry.authenticate('admin-0123456789abcdef')).toEqual({ name: 'admin', scopes: ['admin'] });
  });

  it('stops the boot on a bad tokens file, naming the variable', () => {
    const file = join(dir, 'tokens.json');
    writeFileSync(file, JSON.stringify([{ name: 'x', token: 'short', scopes: ['root'] }]));
    expect(() =>
      resolveTokens(loadConfig({ RUNLEDGER_DB: join(dir, 'r.db'), RUNLEDGER_TOKENS_FILE: file })),
    ).toThrow(ConfigError);
    expect(() =>
      resolveTokens(loadConfig({ RUNLEDGER_DB: join(dir, 'r.db'), RUNLEDGER_TOKENS_FILE: file })),
    ).toThrow(/RUNLEDGER_TOKENS_FILE/);
  });
});
