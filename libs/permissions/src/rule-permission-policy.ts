import { lstatSync, readlinkSync } from 'node:fs';
import path from 'node:path';
import { PermissionCheck, PermissionRulesConfig, PermissionVerdict } from '@runledger/contracts';
import {
  analyzeShell,
  commandUsesSudo,
  ShellCommand,
  ShellWord,
  staticPrefix,
  SUDO_SECRET,
} from '@runledger/tools';
import { PermissionService, PermissionSubject } from './permission-service';

const SEVERITY: Record<PermissionVerdict, number> = { allow: 0, prompt: 1, deny: 2, hard_stop: 3 };

const check = (verdict: PermissionVerdict, rule: string | null, reason: string): PermissionCheck => ({
  verdict,
  rule,
  reason,
});
const ALLOW = check('allow', null, 'allowed');

/** The most severe verdict wins; on a tie the first found is kept (it names the earliest part). */
export function mostSevere(checks: readonly PermissionCheck[]): PermissionCheck {
  return checks.reduce((a, b) => (SEVERITY[b.verdict] > SEVERITY[a.verdict] ? b : a), ALLOW);
}

/** Top-level folders whose recursive removal, chmod or move is a hard stop. */
const SYSTEM_TOP = [
  '/bin',
  '/boot',
  '/dev',
  '/etc',
  '/home',
  '/lib',
  '/lib32',
  '/lib64',
  '/libx32',
  '/opt',
  '/proc',
  '/root',
  '/sbin',
  '/srv',
  '/sys',
  '/usr',
  '/var',
  '/mnt',
  '/media',
  '/run',
  '/snap',
];
/** Writing anywhere below these is a hard stop. */
const PROTECTED_WRITE = [
  '/etc',
  '/boot',
  '/bin',
  '/sbin',
  '/lib',
  '/lib32',
  '/lib64',
  '/libx32',
  '/usr',
  '/sys',
  '/proc',
];
const BLOCK_DEVICE =
  /^\/dev\/(sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|loop\d|dm-\d|md\d|sr\d|mapper\/|disk\/|root\b|nbd\d|ram\d|mem$|kmem$|port$)/;
const HARMLESS_SINKS = new Set([
  '/dev/null',
  '/dev/stdout',
  '/dev/stderr',
  '/dev/tty',
  '/dev/zero',
  '/dev/full',
]);

const ALWAYS_HARD_STOP = new Set([
  'mkfs',
  'mke2fs',
  'mkswap',
  'mkdosfs',
  'mkntfs',
  'wipefs',
  'shutdown',
  'reboot',
  'halt',
  'poweroff',
  'telinit',
  'kexec',
  'killall5',
]);
const DISK_TOOLS = new Set([
  'fdisk',
  'sfdisk',
  'cfdisk',
  'parted',
  'gdisk',
  'sgdisk',
  'blkdiscard',
  'hdparm',
]);
/** Read-only programs: allowed when the paths they read are inside the allowed root. */
const READ_ONLY = new Set([
  'ls',
  'cat',
  'grep',
  'egrep',
  'fgrep',
  'rg',
  'head',
  'tail',
  'wc',
  'sort',
  'uniq',
  'cut',
  'tr',
  'diff',
  'cmp',
  'file',
  'stat',
  'du',
  'df',
  'tree',
  'jq',
  'less',
  'more',
  'nl',
  'od',
  'hexdump',
  'xxd',
  'sha256sum',
  'sha1sum',
  'sha512sum',
  'md5sum',
  'cksum',
  'base64',
  'base32',
  'column',
  'fold',
  'expand',
  'unexpand',
  'paste',
  'comm',
  'tac',
  'rev',
  'strings',
  'realpath',
  'readlink',
  'basename',
  'dirname',
  'find',
  'sed',
  'awk',
  'gawk',
  'mawk',
  'nawk',
  'zcat',
  'bat',
  'look',
  'join',
  'fmt',
  'pr',
  'iconv',
  'tsort',
]);
/** Programs that read no files at all: always allowed. */
const PURE = new Set([
  'echo',
  'printf',
  'pwd',
  'true',
  'false',
  'test',
  '[',
  'date',
  'seq',
  'sleep',
  'yes',
  'whoami',
  'id',
  'uname',
  'hostname',
  'uptime',
  'which',
  'type',
  'printenv',
  'env',
  'nproc',
  'arch',
  'tty',
  'expr',
  'cal',
  'locale',
  'groups',
  'getconf',
  'command',
  ':',
  'exit',
  'return',
  'cd',
  'set',
  'shift',
  'read',
  'wait',
  'local',
  'declare',
  'export',
  'unset',
  'alias',
]);
const OUTPUT_OPTIONS: Record<string, string[]> = {
  sort: ['-o', '--output'],
  tree: ['-o'],
  iconv: ['-o', '--output'],
};
const SECOND_OPERAND_OUTPUT = new Set(['uniq', 'xxd']);
const NETWORK = new Set([
  'curl',
  'wget',
  'ssh',
  'scp',
  'sftp',
  'rsync',
  'nc',
  'ncat',
  'netcat',
  'socat',
  'telnet',
  'ftp',
  'ping',
  'dig',
  'nslookup',
  'host',
  'apt',
  'apt-get',
  'pip',
  'pip3',
  'npm',
  'npx',
  'yarn',
  'pnpm',
  'docker',
  'kubectl',
  'aria2c',
  'lynx',
  'w3m',
]);
/** Programs that write or delete the paths they are given. */
const WRITES_ALL_PATHS = new Set([
  'rm',
  'rmdir',
  'touch',
  'truncate',
  'mkdir',
  'tee',
  'shred',
  'unlink',
  'mkfifo',
  'mknod',
  'chmod',
  'chown',
  'chgrp',
  'chattr',
  'setfacl',
  'mv',
]);
const WRITES_LAST_PATH = new Set(['cp', 'install', 'ln', 'rsync', 'scp']);
const GIT_READ_ONLY = new Set([
  'status',
  'log',
  'diff',
  'show',
  'rev-parse',
  'ls-files',
  'blame',
  'describe',
  'shortlog',
  'grep',
  'cat-file',
  'ls-tree',
  'version',
  'help',
]);
const DANGEROUS_ENV =
  /^(LD_[A-Z_]+|PATH|BASH_ENV|ENV|IFS|PROMPT_COMMAND|SHELLOPTS|PS4|GCONV_PATH|NODE_OPTIONS|PYTHONSTARTUP)(\[[^\]]*\])?\+?=/;
/** A function that calls itself piped into itself in the background: `:(){ :|:& };:` and renamed variants. */
const FORK_BOMB = /(^|[\s;&|(){}])([^\s;&|(){}<>'"`]+)\s*\(\s*\)\s*\{[^}]*\2\s*\|\s*&?\s*\2\s*&/;

export interface RulePermissionPolicyOptions {
  allowedRoot: string;
  rules?: Partial<PermissionRulesConfig>;
}

/**
 * PermissionService from rules: built-in defaults (hard stops for wiping `/`, mkfs, block devices,
 * fork bombs, writes to /etc, chmod -R 777 /, shutdown; prompts for writes, deletes, network and
 * unknown programs; allow for read-only programs inside the root) plus configured rules.
 * Shell commands are parsed and every part is judged; the most severe verdict wins.
 */
export class RulePermissionPolicy extends PermissionService {
  private readonly root: string;
  private readonly rules: PermissionRulesConfig;
  private readonly patterns: { rule: string; re: RegExp; verdict: PermissionVerdict; reason: string }[];
  private readonly protectedPaths: string[];

  constructor(options: RulePermissionPolicyOptions) {
    super();
    this.root = path.resolve(options.allowedRoot);
    this.rules = PermissionRulesConfig.parse(options.rules ?? {});
    this.patterns = this.rules.patterns.map((p) => ({ ...p, re: new RegExp(p.pattern, 'i') }));
    this.protectedPaths = [...PROTECTED_WRITE, ...this.rules.protected_paths];
  }

  check(subject: PermissionSubject): PermissionCheck {
    const { manifest, args } = subject;
    switch (manifest.name) {
      case 'shell_exec':
        return this.checkShellCommand(
          String(args.command ?? ''),
          typeof args.cwd === 'string' ? args.cwd : undefined,
        );
      case 'file_write':
        return this.checkWritePath(String(args.path ?? ''));
      case 'file_read':
        return this.isInsideRoot(this.real(this.resolve(String(args.path ?? ''))))
          ? ALLOW
          : check('deny', 'read_outside_root', `reading outside the allowed root: ${String(args.path)}`);
      case 'memory_search':
      case 'memory_list':
      case 'memory_insert':
        return ALLOW;
      default:
        return manifest.requires_permission
          ? check('prompt', 'tool_requires_permission', `${manifest.name} asks before it runs`)
          : ALLOW;
    }
  }

  requiredSecrets(subject: PermissionSubject): string[] {
    const names = [...subject.manifest.secrets];
    if (subject.manifest.name === 'shell_exec' && commandUsesSudo(String(subject.args.command ?? '')))
      names.push(SUDO_SECRET);
    return [...new Set(names)];
  }

  // ------------------------------------------------------------------ paths

  private resolve(p: string, cwd?: string): string {
    const home = p === '~' || p.startsWith('~/') ? this.root + p.slice(1) : p;
    return path.resolve(cwd ? path.resolve(this.root, cwd) : this.root, home);
  }

  /**
   * `abs` with every symlink along it followed, as the kernel would at use time: a link inside the
   * root may lead anywhere (`ln -s /etc e`, then `e/cron.d/x` is `/etc/cron.d/x`). Parts that do not
   * exist yet are kept as written; a dangling link leads to its target.
   */
  private real(abs: string): string {
    const rest = abs.split(path.sep).filter(Boolean);
    let at: string = path.sep;
    for (let hops = 0; rest.length > 0;) {
      const next = path.join(at, rest.shift()!);
      let link: string | null = null;
      try {
        if (hops < 40 && lstatSync(next).isSymbolicLink()) link = readlinkSync(next);
      } catch {
        return path.join(next, ...rest);
      }
      if (link === null) {
        at = next;
        continue;
      }
      hops++;
      rest.unshift(...link.split(path.sep).filter(Boolean));
      if (path.isAbsolute(link)) at = path.sep;
    }
    return at;
  }

  /** Inside the root as written or as it really is (the root itself may be reached through a link). */
  private isInsideRoot(abs: string): boolean {
    const within = (root: string) => abs === root || abs.startsWith(root + path.sep);
    return within(this.root) || within(this.real(this.root));
  }

  private isProtected(abs: string): boolean {
    return this.protectedPaths.some((p) => abs === p || abs.startsWith(p.endsWith('/') ? p : p + '/'));
  }

  /** `~`, `/`, `/usr`, `/etc/*`, `//`, `/.`: targets whose recursive removal wrecks the machine. */
  private isCatastrophic(word: ShellWord, cwd?: string): boolean {
    const t = word.text;
    if (/^(~|\$HOME|\$\{HOME\})(\/+(\*|\.\*|\.)?)*$/.test(t)) return true;
    if (word.dynamic) return false;
    // `/*`, `/usr/.*`, `*` (from /): a glob of everything in a folder counts as the folder
    let abs = this.resolve(t, cwd);
    while (/\/(\*|\.\*|\*\.\*)$/.test(abs)) abs = abs.replace(/\/(\*|\.\*|\*\.\*)$/, '') || '/';
    return abs === '/' || SYSTEM_TOP.includes(abs);
  }

  /** Where a write to `target` lands: hard stop for system folders and block devices, deny outside the root. */
  checkWritePath(target: string, cwd?: string): PermissionCheck {
    if (!target) return check('deny', 'empty_path', 'no path given');
    if (target.includes('\0')) return check('deny', 'nul_in_path', 'path contains a NUL byte');
    const written = this.resolve(target, cwd);
    if (HARMLESS_SINKS.has(written) || /^\/dev\/fd\/\d+$/.test(written)) return ALLOW;
    for (const abs of new Set([written, this.real(written)])) {
      if (BLOCK_DEVICE.test(abs))
        return check('hard_stop', 'write_block_device', `writing to the block device ${abs}`);
      if (abs === '/' || this.isProtected(abs))
        return check('hard_stop', 'write_system_path', `writing to the system path ${abs}`);
    }
    const abs = this.real(written);
    if (!this.isInsideRoot(abs))
      return check('deny', 'write_outside_root', `writing outside the allowed root: ${abs}`);
    return this.rules.prompt_file_writes
      ? check('prompt', 'write_inside_root', `writes ${path.relative(this.root, abs) || '.'}`)
      : ALLOW;
  }

  private checkWriteWord(word: ShellWord, cwd?: string): PermissionCheck {
    if (word.dynamic) {
      // `/dev/$X`, `/etc/$(x)`: the fixed prefix is enough to stop it
      const prefix = staticPrefix(word);
      if (prefix.startsWith('/') && prefix.length > 1) {
        const c = this.checkWritePath(prefix, cwd);
        if (c.verdict === 'hard_stop') return c;
      }
      return check('prompt', 'write_dynamic_path', `writes a path known only at run time: ${word.text}`);
    }
    return this.checkWritePath(word.text, cwd);
  }

  private checkReadWord(word: ShellWord, cwd?: string): PermissionCheck {
    const t =
      word.text.includes('=') && word.text.startsWith('-')
        ? word.text.slice(word.text.indexOf('=') + 1)
        : word.text;
    if (t.startsWith('-') || t === '') return ALLOW;
    if (word.dynamic)
      return /^(\/|~|\.\.)/.test(t)
        ? check('prompt', 'read_dynamic_path', 'reads a path known only at run time')
        : ALLOW;
    const abs = this.resolve(t, cwd);
    return HARMLESS_SINKS.has(abs) || this.isInsideRoot(this.real(abs))
      ? ALLOW
      : check('prompt', 'read_outside_root', `reads outside the allowed root: ${t}`);
  }

  // ------------------------------------------------------------------ shell

  checkShellCommand(command: string, cwd?: string): PermissionCheck {
    const found: PermissionCheck[] = [];
    if (FORK_BOMB.test(command)) found.push(check('hard_stop', 'fork_bomb', 'a fork bomb'));
    for (const p of this.patterns) if (p.re.test(command)) found.push(check(p.verdict, p.rule, p.reason));
    if (cwd !== undefined && !this.isInsideRoot(this.real(this.resolve(cwd))))
      found.push(check('deny', 'cwd_outside_root', `cwd outside the allowed root: ${cwd}`));
    const analysis = analyzeShell(command);
    if (analysis.errors.length)
      found.push(
        check('prompt', 'unparsed_shell', `could not fully parse the command (${analysis.errors[0]})`),
      );
    // `cd / && rm -rf *`: later relative paths are judged from where cd went (scoping of
    // subshells is ignored, which only ever makes a verdict stricter)
    let here = cwd;
    // `X=/; rm -rf $X`: variables set to fixed values earlier in the line are substituted
    const vars = new Map<string, string>();
    for (const raw of analysis.commands) {
      const c = this.substitute(raw, vars);
      if (c.name === '' || ['export', 'declare', 'local', 'readonly', 'typeset'].includes(c.name)) {
        const sets = c.name === '' ? c.assignments : c.args.filter((a) => !a.dynamic).map((a) => a.text);
        for (const a of sets) {
          const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/s.exec(a);
          if (m && !/[$`]/.test(m[2])) vars.set(m[1], m[2]);
          else if (m) vars.delete(m[1]);
        }
      }
      if (c.name === 'cd' && !c.dynamic) {
        const target = c.args.find((a) => !a.text.startsWith('-'));
        if (!target) here = this.root;
        else if (!target.dynamic) here = this.resolve(target.text, here);
      }
      found.push(this.checkCommand(c, here));
    }
    return mostSevere(found);
  }

  /** The command with known variables filled in; a program that becomes known is judged by name. */
  private substitute(c: ShellCommand, vars: ReadonlyMap<string, string>): ShellCommand {
    const fill = (w: ShellWord): ShellWord => {
      if (!w.dynamic) return w;
      const text = w.text.replace(
        /\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))/g,
        (m, a?: string, b?: string) => vars.get((a ?? b)!) ?? m,
      );
      return { text, dynamic: /[$`]|[<>]\(/.test(text) };
    };
    const program = fill({ text: c.program, dynamic: c.dynamic });
    const name = program.dynamic ? program.text : (program.text.split('/').pop() ?? program.text);
    return {
      ...c,
      name: c.dynamic ? name : c.name,
      program: program.text,
      dynamic: program.dynamic,
      args: c.args.map(fill),
      redirects: c.redirects.map((r) => ({ ...r, target: fill(r.target) })),
    };
  }

  private checkCommand(c: ShellCommand, cwd?: string): PermissionCheck {
    const found: PermissionCheck[] = [];
    for (const r of c.redirects) {
      if (r.op === '>&' || r.op === '<&') {
        if (/^(\d+|-)$/.test(r.target.text)) continue;
      }
      if (['>', '>>', '>|', '&>', '&>>', '>&', '<>'].includes(r.op))
        found.push(this.checkWriteWord(r.target, cwd));
      else if (r.op === '<') found.push(this.checkReadWord(r.target, cwd));
    }
    if (c.assignments.some((a) => DANGEROUS_ENV.test(a)))
      found.push(
        check(
          'prompt',
          'dangerous_env',
          `sets ${c.assignments.find((a) => DANGEROUS_ENV.test(a))!.split('=')[0]}`,
        ),
      );
    if (c.sudo) found.push(check('prompt', 'sudo', 'runs as root through sudo'));
    if (c.name === '' || c.wrapper) return mostSevere(found);
    if (c.dynamic) {
      found.push(check('prompt', 'dynamic_command', `runs a program known only at run time (${c.program})`));
      return mostSevere(found);
    }
    found.push(this.checkProgram(c, cwd));
    return mostSevere(found);
  }

  private checkProgram(c: ShellCommand, cwd?: string): PermissionCheck {
    const name = c.name;
    const args = c.args;
    const words = args.map((a) => a.text);
    const operands = operandsOf(args);
    const has = (...flags: string[]) => words.some((w) => flags.includes(w));
    const shortFlag = (letter: string) => words.some((w) => /^-[a-zA-Z]+$/.test(w) && w.includes(letter));
    const r = this.rules;

    if (r.hard_stop_programs.includes(name))
      return check('hard_stop', 'configured_hard_stop', `${name} is configured as a hard stop`);
    if (r.deny_programs.includes(name)) return check('deny', 'configured_deny', `${name} is not allowed`);
    if (ALWAYS_HARD_STOP.has(name) || /^mkfs\./.test(name))
      return check(
        'hard_stop',
        `program_${name.replace(/\W/g, '_')}`,
        `${name} destroys data or stops the machine`,
      );
    if (name === 'init' && operands.some((o) => /^[06sS]$/.test(o.text)))
      return check('hard_stop', 'program_init', 'changes the run level');
    if (
      name === 'systemctl' &&
      operands.some((o) => /^(poweroff|reboot|halt|kexec|emergency|rescue|suspend|hibernate)$/.test(o.text))
    )
      return check('hard_stop', 'systemctl_power', 'stops the machine');
    if (DISK_TOOLS.has(name))
      return has('-l', '--list', 'print')
        ? check('prompt', 'disk_tool', `${name} reads the partition table`)
        : check('hard_stop', 'disk_tool', `${name} rewrites disks`);
    if (
      (name === 'kill' || name === 'pkill') &&
      (words.slice(1).includes('-1') || operands.some((o) => o.text === '-1' || o.text === '1'))
    )
      return check('hard_stop', 'kill_all', 'kills every process or init');

    const found: PermissionCheck[] = [];
    if (r.prompt_programs.includes(name))
      found.push(check('prompt', 'configured_prompt', `${name} asks first`));

    if (name === 'rm' || name === 'rmdir' || name === 'unlink' || name === 'shred') {
      const recursive =
        has('--recursive', '-r', '-R') || shortFlag('r') || shortFlag('R') || name === 'rmdir';
      if (has('--no-preserve-root')) return check('hard_stop', 'rm_root', 'rm --no-preserve-root');
      for (const o of operands) {
        if ((recursive || name === 'shred') && this.isCatastrophic(o, cwd))
          return check('hard_stop', 'rm_root', `${name} ${words.join(' ')} wipes ${o.text}`);
        if (name === 'shred' && BLOCK_DEVICE.test(this.resolve(o.text, cwd)))
          return check('hard_stop', 'write_block_device', `shreds ${o.text}`);
      }
    }
    if (name === 'chmod' || name === 'chown' || name === 'chgrp' || name === 'chattr' || name === 'setfacl') {
      const recursive = has('--recursive', '-R') || shortFlag('R');
      // the first operand of chmod/chown is the mode/owner
      for (const o of operands.slice(name === 'chattr' || name === 'setfacl' ? 0 : 1)) {
        if ((recursive || o.text.replace(/\/+$/, '') === '') && this.isCatastrophic(o, cwd))
          return check('hard_stop', 'chmod_root', `${name} on ${o.text}`);
      }
    }
    if (name === 'mv') {
      for (const o of operands)
        if (this.isCatastrophic(o, cwd)) return check('hard_stop', 'mv_root', `moves ${o.text}`);
    }
    if (name === 'dd') {
      for (const w of words) {
        if (w.startsWith('of=')) found.push(this.checkWriteWord({ text: w.slice(3), dynamic: false }, cwd));
        if (w.startsWith('if=')) found.push(this.checkReadWord({ text: w.slice(3), dynamic: false }, cwd));
      }
      found.push(check('prompt', 'write_program', 'dd writes data'));
      return mostSevere(found);
    }
    if (name === 'find') {
      const starts = args
        .slice(
          0,
          Math.max(
            0,
            args.findIndex((a) => a.text.startsWith('-') || a.text === '(' || a.text === '!'),
          ),
        )
        .concat(args.every((a) => !a.text.startsWith('-')) ? args : []);
      const destructive =
        has('-delete') ||
        args.some(
          (a, i) =>
            ['-exec', '-execdir', '-ok', '-okdir'].includes(a.text) &&
            /^(rm|shred|mv|chmod|chown|unlink|dd|truncate)$/.test(path.basename(args[i + 1]?.text ?? '')),
        );
      if (destructive && starts.some((s) => this.isCatastrophic(s, cwd)))
        return check('hard_stop', 'find_delete_root', 'deletes from a system folder with find');
      for (const s of starts) found.push(this.checkReadWord(s, cwd));
      if (has('-delete')) found.push(check('prompt', 'delete_program', 'find -delete removes files'));
      for (const [i, a] of args.entries())
        if (/^-fprint|^-fls$/.test(a.text) && args[i + 1]) found.push(this.checkWriteWord(args[i + 1], cwd));
      // -exec's command was unfolded by the parser and is judged on its own
      return mostSevere(found);
    }

    if (
      WRITES_ALL_PATHS.has(name) ||
      WRITES_LAST_PATH.has(name) ||
      (name === 'sed' &&
        (has('-i', '--in-place') || words.some((w) => /^-[a-zA-Z]*i/.test(w) || w.startsWith('--in-place'))))
    ) {
      const skipFirst = ['chmod', 'chown', 'chgrp'].includes(name) || name === 'sed';
      let targets = operands.slice(skipFirst ? 1 : 0);
      if (WRITES_LAST_PATH.has(name)) {
        const t = args.findIndex((a) => a.text === '-t' || a.text === '--target-directory');
        targets = t >= 0 && args[t + 1] ? [args[t + 1]] : targets.slice(-1);
      }
      // deleting is remembered apart from writing: an allow_always for writes does not cover rm
      if (['rm', 'rmdir', 'unlink', 'shred'].includes(name))
        found.push(check('prompt', 'delete_program', `${name} deletes files`));
      for (const t of targets) found.push(this.checkWriteWord(t, cwd));
      if (name === 'mv' || name === 'cp')
        for (const s of operands.slice(0, -1)) found.push(this.checkReadWord(s, cwd));
      found.push(check('prompt', 'write_program', `${name} changes files`));
      return mostSevere(found);
    }
    if (NETWORK.has(name)) {
      found.push(check('prompt', 'network_program', `${name} uses the network or installs software`));
      return mostSevere(found);
    }
    if (name === 'git') {
      // `-c core.pager=...`, `--exec-path`: a config on the command line runs programs; --output writes
      if (words.some((w) => /^(-c|--config-env|--exec-path|--output)(=|$)/.test(w) || /^-c./.test(w))) {
        found.push(check('prompt', 'git_config', 'git with command-line configuration or output file'));
        return mostSevere(found);
      }
      // `git -C dir status`: the folder is an option value, not the subcommand
      const cIdx = args.findIndex((a) => a.text === '-C');
      const sub =
        operands.find((o) => !o.text.startsWith('-') && (cIdx < 0 || o !== args[cIdx + 1]))?.text ?? '';
      if (cIdx >= 0 && args[cIdx + 1]) found.push(this.checkReadWord(args[cIdx + 1], cwd));
      found.push(
        GIT_READ_ONLY.has(sub)
          ? ALLOW
          : check('prompt', 'git_write', `git ${sub} changes the repository or uses the network`),
      );
      return mostSevere(found);
    }
    if (
      name === 'sed' &&
      args.some((a) => /(^|[;}\n])\s*[0-9,$/!]*\s*[wWe]\b|\/[gpIiMm0-9]*[we]/.test(a.text))
    ) {
      found.push(check('prompt', 'write_program', 'sed script writes files or runs commands'));
      return mostSevere(found);
    }
    if (
      /^(g|m|n)?awk$/.test(name) &&
      args.some((a) => /system\s*\(|getline|print[^;]*>|printf[^;]*>|\|\s*"|fflush/.test(a.text))
    ) {
      found.push(check('prompt', 'awk_side_effects', 'awk program runs commands or writes files'));
      return mostSevere(found);
    }
    // read-only programs that can still write a file named by an option or a second operand
    const outputOption = OUTPUT_OPTIONS[name];
    if (outputOption) {
      for (const [i, a] of args.entries()) {
        if (outputOption.includes(a.text) && args[i + 1]) found.push(this.checkWriteWord(args[i + 1], cwd));
        const eq = outputOption.find((o) => o.startsWith('--') && a.text.startsWith(`${o}=`));
        if (eq) found.push(this.checkWriteWord({ ...a, text: a.text.slice(eq.length + 1) }, cwd));
        if (/^-o./.test(a.text) && outputOption.includes('-o'))
          found.push(this.checkWriteWord({ ...a, text: a.text.slice(2) }, cwd));
      }
    }
    if (SECOND_OPERAND_OUTPUT.has(name) && operands[1]) found.push(this.checkWriteWord(operands[1], cwd));
    if (PURE.has(name) || r.allow_programs.includes(name)) return mostSevere(found);
    if (READ_ONLY.has(name)) {
      const files =
        name === 'grep' ||
        name === 'egrep' ||
        name === 'fgrep' ||
        name === 'rg' ||
        /awk$/.test(name) ||
        name === 'sed' ||
        name === 'jq'
          ? operands.slice(1)
          : operands;
      for (const f of files) found.push(this.checkReadWord(f, cwd));
      return mostSevere(found);
    }
    found.push(check('prompt', 'unknown_program', `${name} is not a known read-only program`));
    return mostSevere(found);
  }

  // ------------------------------------------------------------------ task input

  /**
   * Hard stops asked for in plain words or as a command inside the task text
   * ("rm -rf /", "wipe the root filesystem"). Only hard_stop or allow: the rest is judged per call.
   */
  checkTaskInput(input: string): PermissionCheck {
    for (const { re, reason } of INPUT_HARD_STOPS)
      if (re.test(input)) return check('hard_stop', 'task_input', reason);
    if (FORK_BOMB.test(input)) return check('hard_stop', 'fork_bomb', 'the task asks for a fork bomb');
    // commands quoted inside prose: judge each line from each dangerous word on
    for (const line of input.split(/\r?\n/)) {
      for (const re of [INPUT_COMMANDS, INPUT_POWER_COMMANDS]) {
        for (const m of line.matchAll(re)) {
          const c = this.checkShellCommand(m[1].replace(/["'`]+\s*$/, ''));
          if (c.verdict === 'hard_stop') return check('hard_stop', c.rule, `the task asks for: ${c.reason}`);
        }
      }
    }
    return check('allow', null, 'no hard-stop request found');
  }
}

/** Non-option arguments (`--` ends options). */
function operandsOf(args: ShellWord[]): ShellWord[] {
  const out: ShellWord[] = [];
  let opts = true;
  for (const a of args) {
    if (opts && a.text === '--') {
      opts = false;
      continue;
    }
    if (opts && a.text.startsWith('-') && a.text !== '-' && !a.dynamic) continue;
    out.push(a);
  }
  return out;
}

/** A dangerous program named anywhere in the text: judged from there to the end of the line. */
const INPUT_COMMANDS =
  /(?:^|[\s`'"(;|&])((?:sudo\s+)?(?:\/[\w/]*\/)?(?:rm|mkfs[.\w]*|dd|chmod|chown|mv|wipefs|shred|fdisk|parted|kill|systemctl|init)\b[^`\n]*)/g;
/** `reboot`, `shutdown` are ordinary English: only where they stand as a command (line start, quoted, after run/sudo/$). */
const INPUT_POWER_COMMANDS =
  /(?:^\s*|[`'"$;&|(]\s*|\b(?:run|execute|exec|sudo)\s+)((?:sudo\s+)?(?:\/[\w/]*\/)?(?:shutdown|reboot|halt|poweroff)\b[^`\n]*)/gi;

const INPUT_HARD_STOPS: { re: RegExp; reason: string }[] = [
  {
    re: /\b(wipe|erase|delete|destroy|nuke|format|remove|trash|obliterate|zero)\b[^.\n]{0,40}\b(root\s*(file\s*system|filesystem|fs|partition|directory|folder|dir|drive|disk)|entire\s+(file\s*system|filesystem|disk|drive|system|machine|server|computer|hard\s*drive)|whole\s+(file\s*system|filesystem|disk|drive|system|machine|server|computer|hard\s*drive)|all\s+(files|data)\s+on\s+(the|this|my)\s+(machine|system|server|computer|disk|drive)|(the|this|my)\s+(hard\s*drive|hard\s*disk|boot\s*(disk|drive|partition)))/i,
    reason: 'the task asks to wipe the whole machine',
  },
  {
    re: /\b(delete|remove|wipe|erase)\s+everything\s+(on|in|from)\s+(\/|the\s+(machine|system|server|computer|disk|drive|root))/i,
    reason: 'the task asks to wipe the whole machine',
  },
  { re: /\bfork\s*bomb\b/i, reason: 'the task asks for a fork bomb' },
];
