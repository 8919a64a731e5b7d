import { ToolManifest } from '@runledger/contracts';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describeAllowAlways } from './allow-always-scope';
import { RulePermissionPolicy } from './rule-permission-policy';

const shell = ToolManifest.parse({
  name: 'shell_exec',
  description: 'run a command',
  args_schema: { type: 'object' },
  requires_permission: true,
});

describe('what allow_always covers', () => {
  let root: string;
  let sut: RulePermissionPolicy;
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'rl-covers-'));
    sut = new RulePermissionPolicy({
      allowedRoot: root,
      rules: { patterns: [{ rule: 'no_make', pattern: '^make\\b', verdict: 'prompt', reason: 'make asks' }] },
    });
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  /** the text the person is shown for the prompt this command gets */
  const coversFor = (command: string): string => {
    const check = sut.check({ manifest: shell, args: { command }, session_id: 's' });
    expect(check.verdict).toBe('prompt');
    return sut.allowAlwaysCovers('shell_exec', check.rule);
  };

  it.each([
    [
      'touch aa.txt',
      /any command that changes files under the allowed root|writes to any file under the allowed root/,
    ],
    ['rm aa.txt', /any command that deletes files/],
    ['curl https://example.com', /uses the network or installs software/],
    ['git commit -m x', /any git command that changes the repository/],
    ['frobnicate --now', /any program that is not known to be read-only/],
    ['make all', /commands matching the configured rule, for this session \(rule no_make\)$/],
  ])('%s: names the tool, the rule and how far it reaches', (command, scope) => {
    const covers = coversFor(command);
    expect(covers).toMatch(/^allow always: shell_exec, .+, for this session \(rule [a-z_]+\)$/);
    expect(covers).toMatch(scope);
  });

  it('one approved touch covers another (same rule), which the text says; a delete is remembered apart', () => {
    expect(coversFor('touch bb.txt')).toBe(coversFor('touch aa.txt'));
    expect(coversFor('rm aa.txt')).not.toBe(coversFor('touch aa.txt'));
  });

  it('a prompt with no rule (a step that asks for confirmation) covers those calls of the tool', () => {
    expect(describeAllowAlways('deploy', null)).toBe(
      'allow always: deploy, calls that ask for confirmation, for this session',
    );
  });
});
