import { closeSync, lstatSync, openSync, readlinkSync } from 'node:fs';
import path from 'node:path';
import {
  PermissionCheck,
  PermissionRulesConfig,
  PermissionVerdict,
  isMcpToolName,
  splitMcpToolName,
} from '@runledger/contracts';
import { PermissionService, PermissionSubject } from './permission-service';
import { promptNeedsOsSandbox } from './os-sandbox-rules';

import { ALLOW, check, newProgramCall, ProgramCall, unknownProgram } from './programs/program-spec';
import { programSpec } from './programs/table';
import { BLOCK_DEVICE, HARMLESS_SINKS, PROCESS_DATA, PROTECTED_WRITE, SYSTEM_TOP } from './system-paths';
import {
  analyzeShell,
  commandUsesSudo,
  ShellCommand,
  ShellWord,
  staticPrefix,
  SUDO_SECRET,
} from './shell/shell-parse';

/**
 * O_PATH (Linux): a descriptor naming where a path leads without opening what is there, so a device or
 * a FIFO is not touched. Not in node's fs.constants; its value is the same on x64 and arm64.
 */
const O_PATH = process.platform === 'linux' && ['x64', 'arm64'].includes(process.arch) ? 0o10000000 : null;

/**
 * Where an existing `abs` leads, resolved by the kernel in one open (every link followed, `..` taken
 * after them): the descriptor's own path, read back. Null when the path does not exist all the way
 * (the caller walks it and keeps what does not exist as written), or cannot be resolved here.
 */
function resolvedByKernel(abs: string): string | null {
  if (O_PATH === null) return null;
  let fd: number;
  try {
    fd = openSync(abs, O_PATH);
  } catch {
    return null;
  }
  try {
    const at = readlinkSync(`/proc/self/fd/${fd}`);
    return at.startsWith(path.sep) && !at.endsWith(' (deleted)') ? at : null;
  } catch {
    return null;
  } finally {
    closeSync(fd);
  }
}

const SEVERITY: Record<PermissionVerdict, number> = { allow: 0, prompt: 1, deny: 2, hard_stop: 3 };

/**
 * The most severe verdict wins. On a tie of prompts, one that only an OS sandbox makes safe to allow
 * wins (the request then names it, and a blanket yes without the sandbox refuses it); otherwise the
 * first found is kept (it names the earliest part).
 */
export function mostSevere(checks: readonly PermissionCheck[]): PermissionCheck {
  return checks.reduce(
    (a, b) =>
      SEVERITY[b.verdict] > SEVERITY[a.verdict] ||
      (SEVERITY[b.verdict] === SEVERITY[a.verdict] && promptNeedsOsSandbox(b) && !promptNeedsOsSandbox(a))
        ? b
        : a,
    ALLOW,
  );
}

/** The folder a command runs in: a path, the root (undefined), or not known before it runs. */
const UNSETTLED = Symbol('unsettled cwd');
type Cwd = string | undefined | typeof UNSETTLED;
/** Where a path is judged from when the folder is unsettled: the root, as before any `cd`. */
const settled = (cwd: Cwd): string | undefined => (cwd === UNSETTLED ? undefined : cwd);

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
        if (isMcpToolName(manifest.name))
          return this.checkMcpTool(manifest.name, manifest.read_only === true);
        return manifest.requires_permission
          ? check('prompt', 'tool_requires_permission', `${manifest.name} asks before it runs`)
          : ALLOW;
    }
  }

  /**
   * An MCP tool asks first (its server's code is not ours to judge) unless a rule allows its server,
   * the tool itself, or tools annotated read-only; a deny rule wins over all of them.
   */
  private checkMcpTool(name: string, readOnly: boolean): PermissionCheck {
    const { server, tool } = splitMcpToolName(name);
    const names = [server, `${server}__${tool}`, name];
    if (this.rules.mcp_deny.some((n) => names.includes(n)))
      return check('deny', 'mcp_deny', `${name} is not allowed`);
    if (this.rules.mcp_allow.some((n) => names.includes(n))) return ALLOW;
    if (readOnly && this.rules.mcp_allow_read_only) return ALLOW;
    return check('prompt', 'mcp_tool', `${name} (MCP server ${server}) asks before it runs`);
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
   * Where `p` really is when a command opens it from `cwd`: symlinks followed and `..` taken after
   * them, as the kernel does, so `lnk/../x` is beside lnk's target, not beside lnk.
   */
  private located(p: string, cwd?: string): string {
    const home = p === '~' || p.startsWith('~/') ? this.root + p.slice(1) : p;
    if (path.isAbsolute(home)) return this.real(home);
    const base = cwd === undefined ? this.root : path.isAbsolute(cwd) ? cwd : `${this.root}/${cwd}`;
    return this.real(`${base}/${home}`);
  }

  /**
   * `abs` with every symlink along it followed, as the kernel would at use time: a link inside the
   * root may lead anywhere (`ln -s /etc e`, then `e/cron.d/x` is `/etc/cron.d/x`). Parts that do not
   * exist yet are kept as written; a dangling link leads to its target. `..` is taken from where the
   * links before it led.
   */
  private real(abs: string): string {
    const resolved = resolvedByKernel(abs);
    if (resolved !== null) return resolved;
    const rest = abs.split(path.sep).filter(Boolean);
    let at: string = path.sep;
    for (let hops = 0; rest.length > 0;) {
      const part = rest.shift()!;
      if (part === '.') continue;
      if (part === '..') {
        at = path.dirname(at);
        continue;
      }
      const next = path.join(at, part);
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

  /**
   * Inside the root as written or as it really is (the root itself may be reached through a link).
   * Other processes' data (/proc, /sys) is never inside, whatever the root.
   */
  private isInsideRoot(abs: string): boolean {
    if (PROCESS_DATA.some((p) => abs === p || abs.startsWith(p + path.sep))) return false;
    const within = (root: string) =>
      abs === root || abs.startsWith(root.endsWith(path.sep) ? root : root + path.sep);
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
    const landing = this.located(target, cwd);
    for (const abs of new Set([written, this.real(written), landing])) {
      if (BLOCK_DEVICE.test(abs))
        return check('hard_stop', 'write_block_device', `writing to the block device ${abs}`);
      if (abs === '/' || this.isProtected(abs))
        return check('hard_stop', 'write_system_path', `writing to the system path ${abs}`);
    }
    const abs = this.real(written);
    for (const where of new Set([abs, landing]))
      if (!this.isInsideRoot(where))
        return check('deny', 'write_outside_root', `writing outside the allowed root: ${where}`);
    return this.rules.prompt_file_writes
      ? check('prompt', 'write_inside_root', `writes ${path.relative(this.root, abs) || '.'}`)
      : ALLOW;
  }

  /**
   * A word whose path only the running shell settles: an expansion (`$X`, `$(...)`), a glob (it may
   * match a symlink that leads out), or a relative path after a `cd` that could not be followed.
   */
  private unsettled(word: ShellWord, text: string, cwd: Cwd): boolean {
    return word.dynamic || word.glob === true || (cwd === UNSETTLED && !/^[/~]/.test(text));
  }

  private checkWriteWord(word: ShellWord, cwd: Cwd): PermissionCheck {
    if (this.unsettled(word, word.text, cwd)) {
      // `/dev/$X`, `/etc/$(x)`: the fixed prefix is enough to stop it
      const prefix = staticPrefix(word);
      if (prefix.startsWith('/') && prefix.length > 1) {
        const c = this.checkWritePath(prefix, settled(cwd));
        if (c.verdict === 'hard_stop') return c;
      }
      // `> /tmp/*.log`: a glob is written where its text points at least (a link may lead further)
      if (!word.dynamic && cwd !== UNSETTLED) {
        const c = this.checkWritePath(word.text, cwd);
        if (c.verdict === 'hard_stop' || c.verdict === 'deny') return c;
      }
      return check('prompt', 'write_dynamic_path', `writes a path known only at run time: ${word.text}`);
    }
    return this.checkWritePath(word.text, settled(cwd));
  }

  private checkReadWord(word: ShellWord, cwd: Cwd): PermissionCheck {
    const t =
      word.text.includes('=') && word.text.startsWith('-')
        ? word.text.slice(word.text.indexOf('=') + 1)
        : word.text;
    if (t.startsWith('-') || t === '') return ALLOW;
    // `<(cmd)` is a pipe from cmd, which is judged on its own
    if (word.dynamic && /^[<>]\(.*\)$/s.test(t)) return ALLOW;
    if (this.unsettled(word, t, cwd))
      return check('prompt', 'read_dynamic_path', `reads a path known only at run time: ${t}`);
    const abs = this.resolve(t, settled(cwd));
    return HARMLESS_SINKS.has(abs) || this.isInsideRoot(this.located(t, settled(cwd)))
      ? ALLOW
      : check('prompt', 'read_outside_root', `reads outside the allowed root: ${t}`);
  }

  // ------------------------------------------------------------------ shell

  checkShellCommand(command: string, cwd?: string): PermissionCheck {
    const found: PermissionCheck[] = [];
    if (FORK_BOMB.test(command)) found.push(check('hard_stop', 'fork_bomb', 'a fork bomb'));
    const configured = this.patterns
      .filter((p) => p.re.test(command))
      .map((p) => check(p.verdict, p.rule, p.reason));
    if (cwd !== undefined && !this.isInsideRoot(this.real(this.resolve(cwd))))
      found.push(check('deny', 'cwd_outside_root', `cwd outside the allowed root: ${cwd}`));
    const analysis = analyzeShell(command);
    if (analysis.errors.length)
      found.push(
        check('prompt', 'unparsed_shell', `could not fully parse the command (${analysis.errors[0]})`),
      );
    // `cd / && rm -rf *`: later relative paths are judged from where cd went (scoping of
    // subshells is ignored, which only ever makes a verdict stricter)
    let here: Cwd = cwd;
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
        const target = c.args.find((a) => !a.text.startsWith('-') || a.text === '-');
        if (!target) here = this.root;
        // `cd $X`, `cd l*`, `cd -`: where it went is known only at run time
        else if (target.dynamic || target.glob || target.text === '-') here = UNSETTLED;
        else if (here !== UNSETTLED || /^[/~]/.test(target.text))
          here = this.located(target.text, settled(here));
      }
      found.push(this.checkCommand(c, here));
    }
    // a configured pattern the command matches names it: it decides at its own severity or above
    const judged = mostSevere(found);
    const named = mostSevere(configured);
    return named.verdict !== 'allow' && SEVERITY[named.verdict] >= SEVERITY[judged.verdict] ? named : judged;
  }

  /** The command with known variables filled in; a program that becomes known is judged by name. */
  private substitute(c: ShellCommand, vars: ReadonlyMap<string, string>): ShellCommand {
    const fill = (w: ShellWord): ShellWord => {
      if (!w.dynamic) return w;
      const text = w.text.replace(
        /\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))/g,
        (m, a?: string, b?: string) => vars.get((a ?? b)!) ?? m,
      );
      // `X='*'; cat $X`: an unquoted variable's value is globbed by the shell
      const glob = w.glob === true || (text !== w.text && /[*?]|\[.*\]/.test(text));
      return { ...w, text, dynamic: /[$`]|[<>]\(/.test(text), glob };
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

  private checkCommand(c: ShellCommand, cwd: Cwd): PermissionCheck {
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
    // a wrapper's inner commands are judged on their own; what it reads itself (`xargs -a FILE`) here
    if (c.wrapper) found.push(...(programSpec(c.name)?.reads?.(this.programCall(c, cwd)) ?? []));
    if (c.name === '' || c.wrapper) return mostSevere(found);
    if (c.dynamic) {
      found.push(check('prompt', 'dynamic_command', `runs a program known only at run time (${c.program})`));
      return mostSevere(found);
    }
    found.push(this.checkProgram(c, cwd));
    return mostSevere(found);
  }

  /**
   * The program's own rules, from its spec in the table: a configured hard stop or deny first, then
   * the spec's deciding verdict, its effects, and its reads (waived by a configured allow).
   */
  private checkProgram(c: ShellCommand, cwd: Cwd): PermissionCheck {
    const name = c.name;
    const r = this.rules;
    if (r.hard_stop_programs.includes(name))
      return check('hard_stop', 'configured_hard_stop', `${name} is configured as a hard stop`);
    if (r.deny_programs.includes(name)) return check('deny', 'configured_deny', `${name} is not allowed`);
    const spec = programSpec(name);
    const call = this.programCall(c, cwd);
    const decided = spec?.decide?.(call);
    if (decided) return decided;
    const found: PermissionCheck[] = [];
    if (r.prompt_programs.includes(name))
      found.push(check('prompt', 'configured_prompt', `${name} asks first`));
    const allowed = r.allow_programs.includes(name);
    // a program the rules name (allowed, or asking first) is the operator's choice: it is no unknown program,
    // and its network use is not the OS sandbox's business
    const named = allowed || r.prompt_programs.includes(name);
    if (!spec) return mostSevere(named ? found : [...found, unknownProgram(name)]);
    found.push(...(spec.effects?.(call) ?? []).map((c) => (named ? namedNetwork(c) : c)));
    if (!allowed) found.push(...(spec.reads?.(call) ?? []));
    return mostSevere(found);
  }

  private programCall(c: ShellCommand, cwd: Cwd): ProgramCall {
    return newProgramCall(c, {
      read: (w) => this.checkReadWord(w, cwd),
      write: (w) => this.checkWriteWord(w, cwd),
      catastrophic: (w) => this.isCatastrophic(w, settled(cwd)),
      resolve: (t) => this.resolve(t, settled(cwd)),
    });
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

const namedNetwork = (c: PermissionCheck): PermissionCheck =>
  c.rule === 'network_program'
    ? { ...c, rule: 'named_network_program', reason: `${c.reason} (named in the permission rules)` }
    : c;

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
