import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PermissionVerdict, ToolManifest } from '@runledger/contracts';
import { RulePermissionPolicy } from './rule-permission-policy';

const ROOT = '/srv/runledger-ws';
const sut = new RulePermissionPolicy({ allowedRoot: ROOT });

/** Ways to hide a command inside a longer command line; `{}` is the command. */
const CHAINS: string[] = [
  '{}',
  'ls; {}',
  'ls && {}',
  'false || {}',
  'ls || true && {}',
  'cat a.txt | {}',
  '{} | cat',
  'ls & {}',
  'ls\n{}',
  'true;{}',
  'ls&&{}',
  'echo $({})',
  'echo `{}`',
  'x=$(ls); {}',
  'echo "$({})"',
  '{ {}; }',
  '( {} )',
  'cat <({})',
  'diff <(ls) <({})',
  'if true; then {}; fi',
  'while false; do :; done; {}',
  "bash -c '{}'",
  'sh -c "{}"',
  "bash -lc '{}'",
  'bash -c "sh -c \'{}\'"',
  "eval '{}'",
  'env {}',
  'env -i PATH=/bin {}',
  'FOO=1 {}',
  'timeout 10 {}',
  'timeout -s KILL 5 {}',
  'nice -n 10 {}',
  'nohup {}',
  'sudo {}',
  'sudo -u root {}',
  'command {}',
  'exec {}',
  'stdbuf -oL {}',
  'setsid {}',
  'time {}',
  'echo x | xargs {}',
  'find . -name a.txt -exec {} \\;',
  'watch -n 1 {}',
];

/** Each is a hard stop on its own; every CHAINS wrapping must be too. */
const HARD_STOP_CORES = [
  'rm -rf /',
  'rm -fr /*',
  'rm -r --no-preserve-root /',
  'rm -rf ~',
  'mkfs.ext4 /dev/sda1',
  'dd if=/dev/zero of=/dev/sda bs=1M',
  'chmod -R 777 /',
  'chown -R nobody /',
  'shutdown -h now',
  'reboot',
  'echo pwned > /etc/passwd',
  'tee -a /etc/sudoers',
  'mv /etc /tmp/etc',
  'find / -delete',
];

/** Not dangerous enough to stop, but not read-only inside the root either: must ask. */
const PROMPT_CORES = [
  'rm a.txt',
  'curl http://example.com',
  'touch new.txt',
  'echo hi > out.txt',
  'python3 script.py',
  'git push',
  'npm install left-pad',
  'sed -i s/a/b/ a.txt',
  'cat /etc/passwd',
  'wget http://x/y',
];

const ALLOW_CORES = [
  'ls -la',
  'cat a.txt',
  'grep -rn foo .',
  'echo hello',
  'pwd',
  'wc -l a.txt',
  'head -n 5 a.txt',
  'git status',
  'find . -name "*.ts"',
  'cat a.txt > /dev/null',
];
/** wrappings that add nothing but structure (no sudo, no unknown program) */
const BENIGN_CHAINS = [
  '{}',
  'ls; {}',
  'ls && {}',
  '{} | sort',
  '{ {}; }',
  '( {} )',
  "bash -c '{}'",
  'sh -c "{}"',
  'timeout 5 {}',
  'nice {}',
  'env {}',
  'echo $({})',
  'echo `{}`',
  'cat <({})',
  'nohup {}',
  'command {}',
  'FOO=1 {}',
];

const fill = (chain: string, core: string) => chain.split('{}').join(core);

describe('RulePermissionPolicy: command chaining and substitution', () => {
  const hardStops = HARD_STOP_CORES.flatMap((core) => CHAINS.map((chain) => [fill(chain, core)] as const));

  it(`has at least 200 hard-stop chaining variants (${hardStops.length})`, () => {
    expect(hardStops.length).toBeGreaterThanOrEqual(200);
  });

  it.each(hardStops)('hard_stop: %j', (command) => {
    expect(sut.checkShellCommand(command).verdict).toBe('hard_stop');
  });

  const absolutePaths = HARD_STOP_CORES.filter((c) => !c.startsWith('echo')).map(
    (core) => [`/usr/bin/${core}`] as const,
  );
  it.each(absolutePaths)('hard_stop with an absolute binary path: %j', (command) => {
    expect(sut.checkShellCommand(command).verdict).toBe('hard_stop');
  });

  const prompts = PROMPT_CORES.flatMap((core) =>
    CHAINS.filter((c) => !c.includes('find .')).map((chain) => [fill(chain, core)] as const),
  );
  it.each(prompts)('prompt (never allow, never a hard stop): %j', (command) => {
    expect(sut.checkShellCommand(command).verdict).toBe('prompt');
  });

  const allowed = ALLOW_CORES.flatMap((core) => BENIGN_CHAINS.map((chain) => [fill(chain, core)] as const));
  it.each(allowed)('allow (read-only inside the root): %j', (command) => {
    expect(sut.checkShellCommand(command)).toMatchObject({ verdict: 'allow' });
  });
});

describe('RulePermissionPolicy: hard-stop patterns and their disguises', () => {
  const cases = [
    "r''m -rf /",
    '\\rm -rf /',
    '"rm" -rf /',
    'rm -rf "/"',
    "rm -rf '/'",
    'rm -r -f /',
    'rm --recursive --force /',
    'rm -Rf /',
    'rm -rf //',
    'rm -rf /.',
    'rm -rf /./',
    'rm -rf /usr',
    'rm -rf /etc/',
    'rm -rf /home/*',
    'rm -rf $HOME',
    'rm -rf ${HOME}',
    'rm -rf ~/',
    "$'rm' -rf /",
    "$'\\x72\\x6d' -rf /",
    'rm -rf -- /',
    'rm -rf ../../../../../../',
    'busybox rm -rf /',
    'mkfs -t ext4 /dev/sdb',
    'mkswap /dev/sda2',
    'wipefs -a /dev/sda',
    'dd of=/dev/nvme0n1 if=image.bin',
    'cat image.bin > /dev/sda',
    'shred -n 3 /dev/sda',
    ':(){ :|:& };:',
    'bomb(){ bomb|bomb& };bomb',
    'poweroff',
    'halt -p',
    'init 0',
    'systemctl reboot',
    'kill -9 -1',
    'echo x >> /etc/hosts',
    'cp evil /etc/cron.d/evil',
    'sed -i s/x/y/ /etc/passwd',
    'ln -sf /bin/sh /etc/evil',
    'touch /etc/nologin',
    'truncate -s0 /etc/passwd',
    'chmod 777 /',
    'chmod -R 000 /etc',
    'chown -R 0 /usr',
    'mv / /dev/null',
    'find / -exec rm -rf {} +',
    'install evil /usr/bin/evil',
    'fdisk /dev/sda',
    'parted /dev/sda rm 1',
    'echo "rm -rf /" | sh',
    "printf 'rm -rf /' | bash",
    'env -S "rm -rf /"',
    'su -c "rm -rf /"',
    'exec 3>/dev/sda',
    'echo hi | tee /etc/motd',
    'cat <<EOF > /etc/passwd\nroot::0:0::/:/bin/sh\nEOF',
    'cat <<EOF\n$(rm -rf /)\nEOF',
    'x=$(rm -rf /) && echo $x',
    'echo ${x:-$(rm -rf /)}',
    'cd / && rm -rf *',
    'cd / && echo $(rm -rf *)',
    'X=/; echo "$(rm -rf $X)"',
    'sort -o /etc/passwd a.txt',
    'xxd -r dump.hex /etc/shadow',
    'tree -o/etc/motd',
    'X=/; rm -rf $X',
    'export T=/etc; echo x > $T/passwd',
    'D=/dev/sda; dd if=/dev/zero of=$D',
    'P=rm; $P -rf /',
    'X=/usr; rm -rf "${X}"',
    'cd /; rm -rf .',
    'cd /etc; echo x > passwd',
    'cd /usr && cd .. && rm -rf ./*',
  ];
  it.each(cases.map((c) => [c]))('hard_stop: %j', (command) => {
    expect(sut.checkShellCommand(command).verdict).toBe('hard_stop');
  });

  it('a fork bomb names its rule, a wipe names rm_root', () => {
    expect(sut.checkShellCommand(':(){ :|:& };:').rule).toBe('fork_bomb');
    expect(sut.checkShellCommand('ls && rm -rf /').rule).toBe('rm_root');
  });
});

describe('RulePermissionPolicy: other verdicts', () => {
  it.each([
    ['$(echo rm) -rf /tmp/x', 'prompt'],
    ['$CMD a.txt', 'prompt'],
    ['LD_PRELOAD=/tmp/x.so ls', 'prompt'],
    ['PATH=/tmp/evil:$PATH ls', 'prompt'],
    ['echo "unterminated', 'prompt'],
    ['echo x > /tmp/out', 'deny'],
    ['cp a.txt /var/tmp/x', 'deny'],
    ['ls > ../outside.txt', 'deny'],
    ['ls 2>/dev/null', 'allow'],
    ['ls 2>&1 >/dev/null', 'allow'],
    ['cat < a.txt', 'allow'],
    ['cat < /etc/shadow', 'prompt'],
    ['ls ../', 'prompt'],
    ['sudo ls', 'prompt'],
    ['sed s/a/b/w/tmp/out a.txt', 'prompt'],
    ['awk \'{ system("id") }\' a.txt', 'prompt'],
    ['git commit -m x', 'prompt'],
    ['fdisk -l', 'prompt'],
    ['cd sub && rm -rf *', 'prompt'],
    ['sort -o sorted.txt a.txt', 'prompt'],
    ['sort a.txt', 'allow'],
    ["git -c core.pager='rm -rf x' log", 'prompt'],
    ['git diff --output=patch.diff', 'prompt'],
    ['git -C sub status', 'allow'],
    ['git -C /etc status', 'prompt'],
    ['uniq a.txt out.txt', 'prompt'],
    ['xxd -r dump.hex bin.out', 'prompt'],
    ['iconv -f latin1 --output=/tmp/x a.txt', 'deny'],
    ['X=build; rm -rf $X', 'prompt'],
    ['X=/; X=$(pwd); rm -rf $X', 'prompt'],
    ['X=ls; $X -la', 'allow'],
    ['cd /tmp && touch x', 'deny'],
    ['cd / && cat etc/passwd', 'prompt'],
    ['cat /proc/$PPID/environ', 'prompt'],
    ['strings /proc/1/environ', 'prompt'],
    ['cat /proc/self/environ', 'prompt'],
  ] as [string, PermissionVerdict][])('%j -> %s', (command, verdict) => {
    expect(sut.checkShellCommand(command).verdict).toBe(verdict);
  });

  it('a cwd outside the root is denied', () => {
    expect(sut.checkShellCommand('ls', '../..').verdict).toBe('deny');
    expect(sut.checkShellCommand('ls', 'sub').verdict).toBe('allow');
  });
});

describe('RulePermissionPolicy: write paths', () => {
  it.each([
    ['/etc/passwd', 'hard_stop'],
    ['/etc', 'hard_stop'],
    ['/etc/', 'hard_stop'],
    ['/usr/bin/x', 'hard_stop'],
    ['/boot/vmlinuz', 'hard_stop'],
    ['/bin/sh', 'hard_stop'],
    ['/lib/x.so', 'hard_stop'],
    ['/sys/kernel/x', 'hard_stop'],
    ['/proc/sys/kernel/x', 'hard_stop'],
    ['/dev/sda', 'hard_stop'],
    ['/dev/nvme0n1', 'hard_stop'],
    ['/dev/mapper/root', 'hard_stop'],
    ['/', 'hard_stop'],
    ['../../etc/passwd', 'hard_stop'],
    [`${ROOT}/../../etc/shadow`, 'hard_stop'],
    ['/tmp/x', 'deny'],
    ['/home/user/.bashrc', 'deny'],
    ['/root/.ssh/authorized_keys', 'deny'],
    ['../x', 'deny'],
    ['../runledger-ws-evil/x', 'deny'],
    ['', 'deny'],
    ['a\0b', 'deny'],
    ['/dev/null', 'allow'],
    ['a.txt', 'prompt'],
    ['sub/dir/b.txt', 'prompt'],
    [`${ROOT}/x`, 'prompt'],
    ['./x/../y', 'prompt'],
    ['~/notes.md', 'prompt'],
  ] as [string, PermissionVerdict][])('checkWritePath(%j) -> %s', (p, verdict) => {
    expect(sut.checkWritePath(p).verdict).toBe(verdict);
  });
});

const manifest = (name: string, over: Partial<ToolManifest> = {}): ToolManifest =>
  ToolManifest.parse({ name, description: name, args_schema: { type: 'object' }, ...over });

describe('RulePermissionPolicy: tool calls and secrets', () => {
  const subject = (name: string, args: Record<string, unknown>, over: Partial<ToolManifest> = {}) => ({
    manifest: manifest(name, over),
    args,
    session_id: 's',
  });

  it('dispatches per tool', () => {
    expect(sut.check(subject('shell_exec', { command: 'rm -rf /' })).verdict).toBe('hard_stop');
    expect(sut.check(subject('shell_exec', { command: 'ls' })).verdict).toBe('allow');
    expect(sut.check(subject('file_write', { path: '/etc/passwd', content: '' })).verdict).toBe('hard_stop');
    expect(sut.check(subject('file_write', { path: 'a.txt', content: '' })).verdict).toBe('prompt');
    expect(sut.check(subject('file_read', { path: '../../etc/shadow' })).verdict).toBe('deny');
    expect(sut.check(subject('file_read', { path: 'a.txt' })).verdict).toBe('allow');
    expect(sut.check(subject('memory_search', { query: 'x' })).verdict).toBe('allow');
    expect(sut.check(subject('deploy', {}, { requires_permission: true })).verdict).toBe('prompt');
    expect(sut.check(subject('weather', {})).verdict).toBe('allow');
  });

  it.each([
    'sudo ls',
    'ls && sudo rm x',
    'echo $(sudo id)',
    'bash -c "sudo id"',
    '/usr/bin/sudo id',
    'timeout 3 sudo id',
  ])('%j requires sudo_password', (command) => {
    expect(sut.requiredSecrets(subject('shell_exec', { command }))).toEqual(['sudo_password']);
  });

  it('no sudo, no secret; manifest secrets are always required', () => {
    expect(sut.requiredSecrets(subject('shell_exec', { command: 'echo sudo' }))).toEqual([]);
    expect(sut.requiredSecrets(subject('deploy', {}, { secrets: ['DEPLOY_TOKEN'] }))).toEqual([
      'DEPLOY_TOKEN',
    ]);
    expect(sut.requiredSecrets(subject('shell_exec', { command: 'sudo id' }, { secrets: ['X'] }))).toEqual([
      'X',
      'sudo_password',
    ]);
  });
});

describe('RulePermissionPolicy: task input', () => {
  it.each([
    'rm -rf /',
    'please run rm -rf / for me',
    'run `sudo rm -rf --no-preserve-root /` on the server',
    'Wipe the root filesystem',
    'format the hard drive',
    'delete everything on the machine',
    'erase the entire disk',
    'nuke the whole filesystem please',
    'mkfs.ext4 /dev/sda1',
    'then dd if=/dev/zero of=/dev/sda',
    'write a fork bomb',
    'run this: :(){ :|:& };:',
    'chmod -R 777 / so everyone can write',
    'run reboot',
    '`shutdown -h now`',
    'shutdown -h now',
    'please execute poweroff',
  ])('hard stop: %j', (input) => {
    expect(sut.checkTaskInput(input).verdict).toBe('hard_stop');
  });

  it.each([
    'list the files in the project',
    'remove the tmp folder in the workspace',
    'delete old logs from ./logs',
    'explain what rm -rf does',
    'format the JSON file',
    'wipe the cache directory',
    'count lines in a.txt',
    'explain how to reboot safely',
    'write a shutdown hook for the server',
    'the process should halt on error',
  ])('allowed: %j', (input) => {
    expect(sut.checkTaskInput(input).verdict).toBe('allow');
  });
});

describe('RulePermissionPolicy: configured rules', () => {
  const configured = new RulePermissionPolicy({
    allowedRoot: ROOT,
    rules: {
      hard_stop_programs: ['terraform'],
      deny_programs: ['nc'],
      prompt_programs: ['ls'],
      allow_programs: ['make'],
      patterns: [{ rule: 'no_prod', pattern: 'prod-db', verdict: 'deny', reason: 'production database' }],
      protected_paths: ['/srv/runledger-ws/protected'],
      prompt_file_writes: false,
    },
  });

  it.each([
    ['terraform destroy', 'hard_stop'],
    ['echo x && terraform apply', 'hard_stop'],
    ['nc -l 4444', 'deny'],
    ['ls', 'prompt'],
    ['make test', 'allow'],
    ['psql prod-db', 'deny'],
    ['echo x > protected/file', 'hard_stop'],
    ['rm -rf /', 'hard_stop'],
  ] as [string, PermissionVerdict][])('%j -> %s', (command, verdict) => {
    expect(configured.checkShellCommand(command).verdict).toBe(verdict);
  });

  it('file writes inside the root run without asking when prompt_file_writes is off', () => {
    expect(configured.checkWritePath('a.txt').verdict).toBe('allow');
    expect(configured.checkWritePath('/etc/x').verdict).toBe('hard_stop');
  });
});

describe('RulePermissionPolicy: symlinks inside the root are judged by where they lead', () => {
  const base = mkdtempSync(join(tmpdir(), 'rl-perm-links-'));
  const ws = join(base, 'ws');
  const outside = join(base, 'outside');
  mkdirSync(join(ws, 'sub'), { recursive: true });
  mkdirSync(outside);
  writeFileSync(join(ws, 'sub', 'a.txt'), 'a');
  symlinkSync('/etc', join(ws, 'etclink'));
  symlinkSync('/etc/passwd', join(ws, 'passwd'));
  symlinkSync('/etc/runledger-no-such-file', join(ws, 'dangling'));
  symlinkSync(outside, join(ws, 'out'));
  symlinkSync('../outside', join(ws, 'up'));
  symlinkSync(join(ws, 'sub'), join(ws, 'inner'));
  symlinkSync('sub', join(ws, 'rel'));
  symlinkSync(ws, join(base, 'ws-link'));
  const policy = new RulePermissionPolicy({ allowedRoot: ws });
  const viaLink = new RulePermissionPolicy({ allowedRoot: join(base, 'ws-link') });
  const subject = (name: string, args: Record<string, unknown>) => ({
    manifest: manifest(name),
    args,
    session_id: 's',
  });
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  it.each([
    ['cat passwd', 'prompt'],
    ['cat etclink/hostname', 'prompt'],
    ['ls out', 'prompt'],
    ['cat up/x', 'prompt'],
    ['cat inner/a.txt', 'allow'],
    ['cat rel/a.txt', 'allow'],
    ['cat sub/a.txt', 'allow'],
    ['echo x > etclink/cron.d/evil', 'hard_stop'],
    ['echo x > passwd', 'hard_stop'],
    ['echo x > dangling', 'hard_stop'],
    ['cp sub/a.txt etclink/profile', 'hard_stop'],
    ['echo x > out/f', 'deny'],
    ['echo x > up/f', 'deny'],
    ['echo x > inner/f', 'prompt'],
    ['echo x > rel/new.txt', 'prompt'],
    ['echo x > /dev/stdout', 'allow'],
    ['echo x > /dev/null', 'allow'],
  ] as [string, PermissionVerdict][])('shell %j -> %s', (command, verdict) => {
    expect(policy.checkShellCommand(command).verdict).toBe(verdict);
  });

  it('a cwd that is a link out of the root is denied', () => {
    expect(policy.checkShellCommand('ls', 'out').verdict).toBe('deny');
    expect(policy.checkShellCommand('ls', 'inner').verdict).toBe('allow');
  });

  it('file tools: a read through a link out of the root is denied, a write is judged at the target', () => {
    expect(policy.check(subject('file_read', { path: 'passwd' })).verdict).toBe('deny');
    expect(policy.check(subject('file_read', { path: 'etclink/hostname' })).verdict).toBe('deny');
    expect(policy.check(subject('file_read', { path: 'inner/a.txt' })).verdict).toBe('allow');
    expect(policy.check(subject('file_write', { path: 'etclink/x', content: '' })).verdict).toBe('hard_stop');
    expect(policy.check(subject('file_write', { path: 'out/x', content: '' })).verdict).toBe('deny');
    expect(policy.check(subject('file_write', { path: 'inner/x', content: '' })).verdict).toBe('prompt');
  });

  it('a root reached through a symlink is still the root', () => {
    expect(viaLink.checkShellCommand('cat sub/a.txt').verdict).toBe('allow');
    expect(viaLink.checkShellCommand(`cat ${join(ws, 'sub', 'a.txt')}`).verdict).toBe('allow');
    expect(viaLink.checkShellCommand('echo x > sub/b.txt').verdict).toBe('prompt');
    expect(viaLink.checkShellCommand('cat passwd').verdict).toBe('prompt');
    expect(viaLink.check(subject('file_read', { path: 'sub/a.txt' })).verdict).toBe('allow');
  });
});
