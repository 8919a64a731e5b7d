import { spawn, spawnSync } from 'node:child_process';
import {
  accessSync,
  closeSync,
  constants,
  existsSync,
  fstatSync,
  ftruncateSync,
  lstatSync,
  mkdirSync,
  openSync,
  readlinkSync,
  readSync,
  realpathSync,
  statSync,
  writeSync,
} from 'node:fs';
import path from 'node:path';
import { ForbiddenError } from '@runledger/contracts';
import type { ToolLogger } from './tool-logger';

export const SANDBOX_MODES = ['bwrap', 'process', 'auto'] as const;
export type SandboxMode = (typeof SANDBOX_MODES)[number];

/** What /health shows about the shell sandbox. */
export interface SandboxStatus {
  requested: SandboxMode;
  /** `unavailable`: bwrap was required and is missing or broken; shell commands are refused */
  effective: 'bwrap' | 'process' | 'unavailable';
  bwrap_path: string | null;
  warning: string | null;
  allowed_root: string;
}

export interface ToolSandboxOptions {
  allowedRoot: string;
  mode?: SandboxMode;
  /** bytes of stdout+stderr kept per command; the rest is dropped and the result marked truncated */
  maxOutputBytes?: number;
  /** a command that prints this much in total is killed: output floods end early */
  floodLimitBytes?: number;
  /** bytes file_read returns at most */
  maxReadBytes?: number;
  /** where bwrap is; `null` means "not installed" (tests); default: looked up on PATH */
  bwrapPath?: string | null;
  /** what else the fallback means for this process (the CLI's --yes), said in the same one warning line */
  fallbackNotice?: string;
  logger?: ToolLogger;
}

export interface ExecOptions {
  /** relative to the allowed root (or absolute inside it); default the root */
  cwd?: string;
  timeoutMs: number;
  signal?: AbortSignal;
  /** written to stdin, which is then closed */
  stdin?: string;
}

export interface ExecResult {
  exit_code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  truncated: boolean;
  timed_out: boolean;
  /** killed because it printed more than the flood limit */
  flooded: boolean;
  cancelled: boolean;
  duration_ms: number;
  sandbox: 'bwrap' | 'process';
}

/** A path or command the sandbox will not touch. */
export class SandboxViolation extends ForbiddenError {}

/** The last part of a path is a symlink where a file was to be opened without following one. */
class FinalLinkViolation extends SandboxViolation {}

interface OpenedFile {
  fd: number;
  /** the file's real path (its verified folder's, then its name) */
  real: string;
  size: number;
}

const SAFE_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
/** The part of /etc a shell needs to look up users, libraries and time; nothing else of it is visible. */
const ETC_FILES = [
  '/etc/passwd',
  '/etc/group',
  '/etc/nsswitch.conf',
  '/etc/ld.so.cache',
  '/etc/ld.so.conf',
  '/etc/ld.so.conf.d',
  '/etc/localtime',
  '/etc/alternatives',
];
const SYSTEM_DIRS = ['/bin', '/sbin', '/lib', '/lib64', '/lib32', '/libx32'];
/** What name resolution and TLS need, visible only to a child given the network. */
const NETWORK_ETC_FILES = ['/etc/resolv.conf', '/etc/hosts', '/etc/ssl', '/etc/ca-certificates'];

/** What a confined child may see beyond the root (read-only) and whether it has the network. */
export interface ConfinedChildOptions {
  readOnly?: readonly string[];
  /** folders inside `readOnly` ones that stay out of sight (an empty tmpfs over each) */
  hidden?: readonly string[];
  network?: boolean;
}

const isWithin = (root: string, p: string): boolean =>
  p === root || p.startsWith(root.endsWith(path.sep) ? root : root + path.sep);

export function findOnPath(binary: string, searchPath = process.env.PATH ?? SAFE_PATH): string | null {
  for (const dir of searchPath.split(':')) {
    if (!dir) continue;
    const candidate = path.join(dir, binary);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

/**
 * Where tools touch the machine. File access is confined to the allowed root by real path, and
 * checked again on the opened descriptor so a path swapped for a symlink between check and use is
 * refused. Shell commands run in their own process group with a scrubbed environment, a timeout
 * that kills the whole group, capped output, and (mode bwrap) inside bubblewrap.
 */
export class ToolSandbox {
  readonly root: string;
  readonly maxOutputBytes: number;
  readonly floodLimitBytes: number;
  readonly maxReadBytes: number;
  private readonly status: SandboxStatus;

  constructor(options: ToolSandboxOptions) {
    mkdirSync(options.allowedRoot, { recursive: true });
    this.root = realpathSync(options.allowedRoot);
    this.maxOutputBytes = options.maxOutputBytes ?? 64 * 1024;
    this.floodLimitBytes = Math.max(options.floodLimitBytes ?? 16 * 1024 * 1024, this.maxOutputBytes);
    this.maxReadBytes = options.maxReadBytes ?? 1024 * 1024;
    this.status = this.decideMode(
      options.mode ?? 'auto',
      options.bwrapPath === undefined ? findOnPath('bwrap') : options.bwrapPath,
    );
    if (this.status.effective === 'process' && this.status.warning && options.fallbackNotice)
      this.status.warning += `; ${options.fallbackNotice}`;
    if (this.status.warning) options.logger?.warn({ sandbox: this.status }, this.status.warning);
  }

  sandboxStatus(): SandboxStatus {
    return { ...this.status };
  }

  private decideMode(requested: SandboxMode, bwrapPath: string | null): SandboxStatus {
    const base = { requested, allowed_root: this.root, bwrap_path: bwrapPath };
    if (requested === 'process') return { ...base, effective: 'process', warning: null };
    const problem = bwrapPath ? this.probeBwrap(bwrapPath) : 'bubblewrap (bwrap) not found on PATH';
    if (!problem) return { ...base, effective: 'bwrap', warning: null };
    if (requested === 'bwrap')
      return {
        ...base,
        effective: 'unavailable',
        warning: `RUNLEDGER_SANDBOX=bwrap but ${problem}: shell commands are refused`,
      };
    return {
      ...base,
      effective: 'process',
      warning: `${problem}: shell commands run without the OS sandbox (process-level confinement only)`,
    };
  }

  /** bwrap may be installed yet unusable (no user namespaces): try it once. */
  private probeBwrap(bwrapPath: string): string | null {
    const r = spawnSync(bwrapPath, [...this.bwrapArgs(this.root, {}), '/bin/sh', '-c', 'exit 0'], {
      timeout: 10_000,
      env: { PATH: SAFE_PATH },
    });
    if (r.error) return `bwrap failed to start (${r.error.message})`;
    if (r.status !== 0)
      return `bwrap does not work here (${r.stderr.toString().trim() || `exit ${r.status}`})`;
    return null;
  }

  private bwrapArgs(cwd: string, env: Record<string, string>, extra: ConfinedChildOptions = {}): string[] {
    const args = [
      '--unshare-all',
      ...(extra.network ? ['--share-net'] : []),
      '--die-with-parent',
      '--new-session',
      '--clearenv',
      '--ro-bind',
      '/usr',
      '/usr',
    ];
    for (const dir of SYSTEM_DIRS) {
      if (!existsSync(dir)) continue;
      const st = lstatSync(dir);
      if (st.isSymbolicLink()) args.push('--symlink', readlinkSync(dir), dir);
      else args.push('--ro-bind', dir, dir);
    }
    for (const f of ETC_FILES) if (existsSync(f)) args.push('--ro-bind', f, f);
    if (extra.network) for (const f of NETWORK_ETC_FILES) if (existsSync(f)) args.push('--ro-bind', f, f);
    args.push('--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp');
    // after the fresh /tmp, so a read-only folder that lives under /tmp (a checkout there) stays visible
    for (const p of extra.readOnly ?? []) args.push('--ro-bind', p, p);
    for (const p of extra.hidden ?? []) args.push('--tmpfs', p);
    args.push('--bind', this.root, this.root, '--chdir', cwd);
    for (const [k, v] of Object.entries(env)) args.push('--setenv', k, v);
    return args;
  }

  // ---------------------------------------------------------------- paths

  /** The lexical absolute path, refused when it leaves the root. */
  private lexical(userPath: string): string {
    if (typeof userPath !== 'string' || userPath.length === 0) throw new SandboxViolation('empty path');
    if (userPath.includes('\0')) throw new SandboxViolation('path contains a NUL byte');
    const abs = path.resolve(this.root, userPath);
    if (!isWithin(this.root, abs)) throw new SandboxViolation(`path escapes the allowed root: ${userPath}`);
    return abs;
  }

  /** Real path of an existing file or folder inside the root (symlinks followed, and refused if they lead out). */
  resolveExisting(userPath: string): string {
    const abs = this.lexical(userPath);
    let real: string;
    try {
      real = realpathSync(abs);
    } catch {
      throw new SandboxViolation(`no such file or folder: ${userPath}`);
    }
    if (!isWithin(this.root, real))
      throw new SandboxViolation(`path resolves outside the allowed root: ${userPath}`);
    return real;
  }

  /** Real path a write would land on; missing parents are checked through their nearest existing ancestor. */
  resolveForWrite(userPath: string): string {
    const abs = this.lexical(userPath);
    if (existsSync(abs) || isDanglingLink(abs)) return this.resolveExisting(userPath);
    let ancestor = path.dirname(abs);
    const rest: string[] = [path.basename(abs)];
    while (!existsSync(ancestor)) {
      rest.unshift(path.basename(ancestor));
      ancestor = path.dirname(ancestor);
    }
    const realAncestor = realpathSync(ancestor);
    if (!isWithin(this.root, realAncestor))
      throw new SandboxViolation(`path resolves outside the allowed root: ${userPath}`);
    return path.join(realAncestor, ...rest);
  }

  /** Relative to the root, for results. */
  relative(real: string): string {
    return path.relative(this.root, real) || '.';
  }

  /** The descriptor's actual path, read back from the kernel: the check that cannot be raced. */
  private verifyFd(fd: number, userPath: string): string {
    let actual: string;
    try {
      actual = readlinkSync(`/proc/self/fd/${fd}`);
    } catch {
      throw new SandboxViolation('cannot verify an opened path (no /proc): refused');
    }
    if (!isWithin(this.root, actual))
      throw new SandboxViolation(`path resolves outside the allowed root: ${userPath}`);
    return actual;
  }

  /**
   * Open `target` with the check bound to what was opened: its folder is opened (links along the way
   * followed) and verified by the descriptor's own path first, the file is opened through that
   * folder's descriptor with O_NOFOLLOW (a final component that is or became a symlink fails with
   * ELOOP), and the file descriptor is verified again. Nothing outside the root is opened but folders
   * (O_DIRECTORY opens no device or FIFO). Answers the descriptor, the file's real path and its stat.
   */
  private openVerified(target: string, userPath: string, flags: number): OpenedFile {
    // the root is a folder; its parent is outside, so the checks below would misname the refusal
    if (target === this.root) throw new SandboxViolation(`not a regular file: ${userPath}`);
    const dirFd = this.openFolder(path.dirname(target), userPath);
    try {
      const folder = this.verifyFd(dirFd, userPath);
      const fd = openPathFd(
        `/proc/self/fd/${dirFd}/${path.basename(target)}`,
        flags | constants.O_NOFOLLOW | constants.O_NONBLOCK,
        userPath,
        0o644,
      );
      try {
        this.verifyFd(fd, userPath);
        const stat = fstatSync(fd);
        if (!stat.isFile()) throw new SandboxViolation(`not a regular file: ${userPath}`);
        return { fd, real: path.join(folder, path.basename(target)), size: stat.size };
      } catch (e) {
        closeSync(fd);
        throw e;
      }
    } finally {
      closeSync(dirFd);
    }
  }

  /** A folder's descriptor, links along its path followed (the caller verifies where it led). */
  protected openFolder(folder: string, userPath: string): number {
    return openPathFd(folder, constants.O_RDONLY | constants.O_DIRECTORY, userPath);
  }

  /**
   * Opens a file to read. The path as written is opened first, through its verified folder: no walk
   * over its parts is needed for the common case of a path naming the file itself. Only when its last
   * part is a symlink (ELOOP there) is it resolved first, with the link refused if it leads out.
   */
  private openToRead(userPath: string): OpenedFile {
    const abs = this.lexical(userPath);
    try {
      return this.openVerified(abs, userPath, constants.O_RDONLY);
    } catch (e) {
      if (!(e instanceof FinalLinkViolation)) throw e;
    }
    return this.openVerified(this.resolveExisting(userPath), userPath, constants.O_RDONLY);
  }

  readFile(
    userPath: string,
    maxBytes = this.maxReadBytes,
  ): { path: string; content: string; bytes: number; truncated: boolean } {
    const { fd, real, size } = this.openToRead(userPath);
    try {
      const want = Math.min(size, maxBytes);
      const buf = Buffer.alloc(want);
      let got = 0;
      while (got < want) {
        const n = readSync(fd, buf, got, want - got, got);
        if (n === 0) break;
        got += n;
      }
      return {
        path: this.relative(real),
        content: buf.subarray(0, got).toString('utf8'),
        bytes: size,
        truncated: size > got,
      };
    } finally {
      closeSync(fd);
    }
  }

  writeFile(
    userPath: string,
    content: string,
    mode: 'overwrite' | 'append' = 'overwrite',
  ): { path: string; bytes: number } {
    const real = this.resolveForWrite(userPath);
    mkdirSync(path.dirname(real), { recursive: true });
    // Created folders are re-checked through the descriptor in openVerified.
    const { fd } = this.openVerified(
      real,
      userPath,
      constants.O_WRONLY | constants.O_CREAT | (mode === 'append' ? constants.O_APPEND : 0),
    );
    try {
      // Truncate only after the descriptor is verified: never truncate a file outside the root.
      if (mode === 'overwrite') ftruncateSync(fd, 0);
      const buf = Buffer.from(content, 'utf8');
      let off = 0;
      while (off < buf.length) off += writeSync(fd, buf, off, buf.length - off);
      return { path: this.relative(real), bytes: buf.length };
    } finally {
      closeSync(fd);
    }
  }

  // ---------------------------------------------------------------- shell

  /** PATH, HOME (the root) and LANG: nothing of the service's environment (keys, tokens) is inherited. */
  scrubbedEnv(): Record<string, string> {
    return { PATH: SAFE_PATH, HOME: this.root, LANG: 'C.UTF-8' };
  }

  /**
   * How to start a long-lived child (an MCP server) confined as a shell command is: under bubblewrap
   * the root is writable, `readOnly` folders visible, the network cut unless asked for, and the
   * environment only `env`; in process mode the program runs as is with `env`.
   */
  confineChild(
    command: string,
    args: readonly string[],
    options: ConfinedChildOptions & { cwd: string; env: Record<string, string> },
  ): { command: string; args: string[]; env: Record<string, string> } {
    if (this.status.effective === 'unavailable')
      throw new SandboxViolation(this.status.warning ?? 'sandbox unavailable');
    if (this.status.effective === 'process') return { command, args: [...args], env: options.env };
    return {
      command: this.status.bwrap_path!,
      args: [...this.bwrapArgs(options.cwd, options.env, options), command, ...args],
      env: { PATH: SAFE_PATH },
    };
  }

  async exec(command: string, options: ExecOptions): Promise<ExecResult> {
    if (this.status.effective === 'unavailable')
      throw new SandboxViolation(this.status.warning ?? 'sandbox unavailable');
    const cwd = this.resolveExisting(options.cwd ?? '.');
    if (!statSync(cwd).isDirectory()) throw new SandboxViolation(`cwd is not a folder: ${options.cwd}`);
    const env = this.scrubbedEnv();
    const sandbox = this.status.effective;
    const [file, argv, spawnEnv] =
      sandbox === 'bwrap'
        ? [
            this.status.bwrap_path!,
            [...this.bwrapArgs(cwd, env), '/bin/sh', '-c', command],
            { PATH: SAFE_PATH },
          ]
        : ['/bin/sh', ['-c', orphanWatchdog(process.pid), 'sh', command], env];
    const started = Date.now();
    const child = spawn(file, argv, { cwd, env: spawnEnv, detached: true, stdio: ['pipe', 'pipe', 'pipe'] });
    const pid = child.pid;
    const killGroup = () => {
      if (pid === undefined) return;
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        // group already gone
      }
    };

    const kept: Record<'stdout' | 'stderr', Buffer[]> = { stdout: [], stderr: [] };
    let keptBytes = 0;
    let seenBytes = 0;
    let truncated = false;
    let flooded = false;
    let timedOut = false;
    let cancelled = false;
    const collect = (stream: 'stdout' | 'stderr') => (chunk: Buffer) => {
      seenBytes += chunk.length;
      const room = this.maxOutputBytes - keptBytes;
      if (room > 0) {
        const part = chunk.length <= room ? chunk : chunk.subarray(0, room);
        kept[stream].push(part);
        keptBytes += part.length;
      }
      if (chunk.length > room) truncated = true;
      if (seenBytes > this.floodLimitBytes && !flooded) {
        flooded = true;
        killGroup();
      }
    };
    child.stdout.on('data', collect('stdout'));
    child.stderr.on('data', collect('stderr'));
    child.stdin.on('error', () => undefined);
    child.stdin.end(options.stdin ?? '');

    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, options.timeoutMs);
    const onAbort = () => {
      cancelled = true;
      killGroup();
    };
    options.signal?.addEventListener('abort', onAbort, { once: true });
    if (options.signal?.aborted) onAbort();

    try {
      const { code, signal } = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>(
        (resolve, reject) => {
          child.once('error', reject);
          child.once('exit', (c, s) => {
            // Background children of the command die with it: nothing outlives the call.
            killGroup();
            // A descendant that left the group (setsid) may hold the pipes open: do not wait for it.
            const late = setTimeout(() => {
              child.stdout.destroy();
              child.stderr.destroy();
              resolve({ code: c, signal: s });
            }, 1000);
            child.once('close', () => {
              clearTimeout(late);
              resolve({ code: c, signal: s });
            });
          });
        },
      );
      return {
        exit_code: code,
        signal,
        stdout: Buffer.concat(kept.stdout).toString('utf8'),
        stderr: Buffer.concat(kept.stderr).toString('utf8'),
        truncated,
        timed_out: timedOut,
        flooded,
        cancelled,
        duration_ms: Date.now() - started,
        sandbox,
      };
    } finally {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
    }
  }
}

/**
 * Process mode has no --die-with-parent: a watchdog in the command's process group kills the
 * group once the service process is gone (a crash must not leave a command running on its own).
 * It holds none of the command's pipes and dies with the group on a normal end.
 */
const orphanWatchdog = (servicePid: number): string =>
  `(trap '' TERM HUP; while kill -0 ${servicePid} 2>/dev/null; do sleep 1; done; kill -9 0) </dev/null >/dev/null 2>&1 & exec /bin/sh -c "$1"`;

function isDanglingLink(p: string): boolean {
  try {
    return lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}

function openPathFd(p: string, flags: number, userPath: string, mode?: number): number {
  try {
    return openSync(p, flags, mode);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ELOOP') throw new FinalLinkViolation(`refused: ${userPath} became a symlink`);
    if (code === 'ENOENT' || code === 'ENOTDIR')
      throw new SandboxViolation(`no such file or folder: ${userPath}`);
    if (code === 'EISDIR') throw new SandboxViolation(`not a regular file: ${userPath}`);
    throw new SandboxViolation(`cannot open ${userPath}: ${code ?? (e as Error).message}`);
  }
}
