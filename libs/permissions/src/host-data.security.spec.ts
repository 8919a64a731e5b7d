import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PermissionVerdict } from '@runledger/contracts';
import { RulePermissionPolicy } from './rule-permission-policy';

/**
 * Without bubblewrap (RUNLEDGER_SANDBOX=auto on a machine without it) shell commands run as the
 * service's user with the host's file system in view: the policy is what keeps host data out.
 * Each of these read host data and was allowed without asking.
 */
describe('RulePermissionPolicy: host data the process sandbox cannot hide', () => {
  const base = mkdtempSync(join(tmpdir(), 'rl-perm-host-'));
  const ws = join(base, 'ws');
  const outside = join(base, 'outside');
  mkdirSync(join(ws, 'sub'), { recursive: true });
  mkdirSync(join(outside, 'dir'), { recursive: true });
  writeFileSync(join(ws, 'a.txt'), 'a');
  writeFileSync(join(ws, 'sub', 'a.txt'), 'a');
  writeFileSync(join(outside, 'outside.txt'), 'secret');
  symlinkSync(join(outside, 'dir'), join(ws, 'lnk'));
  symlinkSync(join(outside, 'outside.txt'), join(ws, 'zz-link'));
  const policy = new RulePermissionPolicy({ allowedRoot: ws });
  const noWritePrompt = new RulePermissionPolicy({ allowedRoot: ws, rules: { prompt_file_writes: false } });
  const wholeMachine = new RulePermissionPolicy({ allowedRoot: '/' });
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  it.each([
    // options that name a file to read
    'date -f /etc/shadow',
    'date --file=/etc/shadow',
    'date -uf /etc/shadow',
    'hostname -F /etc/shadow',
    'grep -f /etc/shadow a.txt',
    'grep --regexp=root /etc/shadow',
    'grep -eroot /etc/shadow',
    'sed -f ../script.sed a.txt',
    'sed --expression=p ../secret',
    'awk -f ../prog.awk a.txt',
    'awk --file=../prog.awk a.txt',
    'jq --from-file=../filter.jq a.json',
    'diff --from-file=/etc/shadow a.txt',
    'wc --files0-from=/etc/names',
    'sort --random-source=/etc/shadow a.txt',
    'strings @/etc/shadow',
    'xargs -a /etc/shadow echo',
    'find -files0-from /etc/names -name x',
    // paths the parser cannot settle: command substitution, variables, globs
    'cat $(echo /path/outside)',
    'cat "$(printf /etc/shadow)"',
    'cat `echo /etc/shadow`',
    'cat $F',
    'f=*; cat $f',
    'cat zz*',
    'cat */x',
    'for p in /proc/[0-9]*; do cat $p/environ; done',
    'cd $(echo /etc) && cat passwd',
    'cd l* && cat outside.txt',
    // `..` after a symlink is the parent of where the link leads
    'cat lnk/../outside.txt',
    'cd lnk/.. && cat outside.txt',
  ])('%j asks first', (command) => {
    expect(policy.checkShellCommand(command).verdict).toBe('prompt');
  });

  it.each([
    ['echo x > lnk/../new.txt', 'deny'],
    ['echo x > zz*', 'prompt'],
    ['echo x > $(echo f)', 'prompt'],
  ] as [string, PermissionVerdict][])('a write to %j is not allowed silently: %s', (command, verdict) => {
    expect(noWritePrompt.checkShellCommand(command).verdict).toBe(verdict);
  });

  it.each(['cat /proc/1/environ', 'cat /proc/self/environ', 'head /sys/class/net/lo/address', 'ls /proc'])(
    "%j: other processes' data is outside even a root of /",
    (command) => {
      expect(wholeMachine.checkShellCommand(command).verdict).toBe('prompt');
    },
  );

  it.each([
    'cat a.txt',
    'cat sub/../a.txt',
    'cd sub && cat a.txt',
    'f=a.txt; cat $f',
    'cat <(ls)',
    'diff <(ls) <(ls sub)',
    'grep -e x a.txt',
    'grep -f sub/a.txt a.txt',
    'date +%s',
    'date -f sub/a.txt',
    "find . -name '*.ts'",
    'echo *',
  ])('%j inside the root is still allowed', (command) => {
    expect(policy.checkShellCommand(command).verdict).toBe('allow');
  });

  it('a root of / still reads ordinary files', () => {
    expect(wholeMachine.checkShellCommand('cat /etc/hostname').verdict).toBe('allow');
  });
});
