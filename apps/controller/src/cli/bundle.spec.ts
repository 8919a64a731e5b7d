import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ValidationError } from '@runledger/contracts';
import { loadConfig } from '../config';
import { BUILT_IN_BUNDLE_PATTERNS, bundlePatterns, checkBundleTarget, installationSecrets } from './bundle';

describe('what a bundle is scrubbed of, and where it may go', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'rl-bundle-cli-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("the installation's keys and tokens: provider keys, MCP servers' values, API tokens, admin.token, the signing key", () => {
    const data = join(dir, 'data');
    mkdirSync(data);
    writeFileSync(join(data, 'admin.token'), 'generated-admin-token-123\n');
    writeFileSync(join(data, 'outbound-signing.key'), 'generated-signing-key-456');
    const tokens = join(dir, 'tokens.json');
    writeFileSync(
      tokens,
      JSON.stringify([{ name: 'ci', token: 'ci-token-0123456789', scopes: ['tasks:read'] }]),
    );
    const env = {
      RUNLEDGER_DB: join(data, 'runledger.db'),
      RUNLEDGER_MODEL: 'openai',
      RUNLEDGER_MODEL_ORCHESTRATOR: 'm',
      OPENAI_API_KEY: 'provider-key-abc',
      RUNLEDGER_ADMIN_TOKEN: 'configured-admin-token-789',
      RUNLEDGER_TOKENS_FILE: tokens,
      RUNLEDGER_MCP_SERVERS: JSON.stringify([
        { name: 'gh', command: 'gh-mcp', env_from: { GH_TOKEN: 'MY_GH' } },
      ]),
      MY_GH: 'gh-value-xyz',
    };
    expect(installationSecrets(loadConfig(env), env).sort()).toEqual(
      [
        'provider-key-abc',
        'gh-value-xyz',
        'configured-admin-token-789',
        'ci-token-0123456789',
        'generated-admin-token-123',
        'generated-signing-key-456',
      ].sort(),
    );
    const bare = { RUNLEDGER_DB: join(dir, 'none', 'runledger.db') };
    expect(installationSecrets(loadConfig(bare), bare)).toEqual([]);
  });

  it('patterns: the built-in credential shapes, then RUNLEDGER_BUNDLE_REDACT, then --redact; a bad one is bad usage', () => {
    const config = loadConfig({ RUNLEDGER_BUNDLE_REDACT: '["ACME-[0-9]{6}"]' });
    expect(bundlePatterns(config, ['x+y']).map((p) => p.source)).toEqual([
      ...BUILT_IN_BUNDLE_PATTERNS,
      'ACME-[0-9]{6}',
      'x+y',
    ]);
    const masks = (text: string) => bundlePatterns(loadConfig({}), []).some((p) => new RegExp(p).test(text));
    for (const credential of [
      'sk-proj-0123456789abcdefghijKLMN',
      'ghp_0123456789abcdefghij0123456789abcdef',
      'AKIAIOSFODNN7EXAMPLE',
      'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload',
      '-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----',
    ])
      expect(masks(credential)).toBe(true);
    expect(masks('task_01a226007b4f916f555acd2acc928205 completed')).toBe(false);
    expect(() => bundlePatterns(loadConfig({}), ['(unclosed'])).toThrow(ValidationError);
    expect(() => loadConfig({ RUNLEDGER_BUNDLE_REDACT: '["(bad"]' })).toThrow(/RUNLEDGER_BUNDLE_REDACT/);
  });

  it('the target must be new and the database must exist (the runtime would create one)', () => {
    const config = loadConfig({ RUNLEDGER_DB: join(dir, 'runledger.db') });
    expect(() => checkBundleTarget(config, 'b.json', dir)).toThrow(
      `no database at ${join(dir, 'runledger.db')}`,
    );
    writeFileSync(join(dir, 'runledger.db'), '');
    expect(checkBundleTarget(config, 'b.json', dir)).toBe(join(dir, 'b.json'));
    writeFileSync(join(dir, 'b.json'), 'x');
    expect(() => checkBundleTarget(config, 'b.json', dir)).toThrow('exists; name a new file');
  });
});
