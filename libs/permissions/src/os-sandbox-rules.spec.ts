import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PermissionRulesConfig } from '@runledger/contracts';
import { promptNeedsOsSandbox } from './os-sandbox-rules';
import { RulePermissionPolicy } from './rule-permission-policy';

/**
 * A prompt names what only an OS sandbox keeps inside the allowed root whenever any part of the
 * command reaches there, so a blanket yes without the sandbox can refuse it by its rule alone.
 */
describe('prompts that only an OS sandbox makes safe to allow', () => {
  let root: string;
  beforeAll(() => (root = mkdtempSync(join(tmpdir(), 'rl-os-sandbox-rules-'))));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const judge = (command: string, rules: Partial<PermissionRulesConfig> = {}) =>
    new RulePermissionPolicy({ allowedRoot: root, rules }).checkShellCommand(command);

  it.each([
    ['cat /etc/shadow', 'read_outside_root'],
    ['cat /proc/1/environ', 'read_outside_root'],
    ['cat /proc/$PPID/environ', 'read_dynamic_path'],
    ['echo x > $HOME/../pwned', 'write_dynamic_path'],
    ["python3 -c \"open('/tmp/pwned', 'w')\"", 'unknown_program'],
    ["node -e \"require('fs').writeFileSync('/tmp/pwned', '')\"", 'unknown_program'],
    ['curl http://127.0.0.1:8080/', 'network_program'],
    ['ln -s ../.. up', 'read_outside_root'],
    ['ln -s /etc e', 'read_outside_root'],
    ['sed -n "1e id" notes.txt', 'sed_side_effects'],
    ['git push', 'git_write'],
    // what comes first in the command does not hide what reaches outside later on
    ['echo a > a.txt; python3 -c "print(1)"', 'unknown_program'],
    ['touch b.txt && cat /etc/hostname', 'read_outside_root'],
  ])('%s asks under %s, which needs the OS sandbox', (command, rule) => {
    const c = judge(command);
    expect(c).toMatchObject({ verdict: 'prompt', rule });
    expect(promptNeedsOsSandbox(c)).toBe(true);
  });

  it.each([
    ['echo a > a.txt', 'write_inside_root'],
    ['touch a.txt', 'write_inside_root'],
    ['rm a.txt', 'delete_program'],
    ['cp a.txt b.txt', 'write_inside_root'],
    ['ln -s a.txt link.txt', 'write_inside_root'],
  ])('%s stays inside the root as the parser sees it (%s)', (command, rule) => {
    const c = judge(command);
    expect(c).toMatchObject({ verdict: 'prompt', rule });
    expect(promptNeedsOsSandbox(c)).toBe(false);
  });

  it('what the permission rules name is the operator’s choice, not the sandbox’s', () => {
    expect(judge('python3 -c "print(1)"', { prompt_programs: ['python3'] })).toMatchObject({
      rule: 'configured_prompt',
    });
    expect(judge('python3 -c "print(1)"', { allow_programs: ['python3'] }).verdict).toBe('allow');
    const curl = judge('curl http://127.0.0.1:8080/', { prompt_programs: ['curl'] });
    expect(promptNeedsOsSandbox(curl)).toBe(false);
    expect(
      judge('make all', {
        patterns: [{ rule: 'make_asks', pattern: '^make\\b', verdict: 'prompt', reason: 'make asks' }],
      }),
    ).toMatchObject({ rule: 'make_asks' });
    // a pattern that names nothing reaching outside does not lower what does
    expect(
      judge('cat /etc/hostname', { patterns: [{ rule: 'x', pattern: '^$', verdict: 'prompt', reason: 'x' }] })
        .rule,
    ).toBe('read_outside_root');
  });
});
