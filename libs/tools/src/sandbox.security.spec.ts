import { spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PluginToolRegistry } from './plugin-tool-registry';
import { findOnPath, SandboxViolation, ToolSandbox } from './sandbox';
import { ToolExecutionContext } from './tool-registry';

const OUTSIDE_SECRET = 'outside-secret-content-8c1f';
const ctx = (secrets: Record<string, string> = {}): ToolExecutionContext => ({
  task_id: 'task_sec',
  session_id: 'sess_sec',
  step_id: null,
  call_id: 'call_sec',
  signal: new AbortController().signal,
  secrets: new Map(Object.entries(secrets)),
});

/** Every live process whose command line contains `marker`. */
function processesWith(marker: string): number[] {
  const out: number[] = [];
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(marker)) out.push(Number(pid));
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

describe('ToolSandbox security', () => {
  let base: string;
  let root: string;
  let outside: string;
  let sut: ToolSandbox;

  beforeAll(() => {
    base = mkdtempSync(path.join(tmpdir(), 'rl-sbx-'));
    root = path.join(base, 'root');
    outside = path.join(base, 'outside');
    mkdirSync(path.join(root, 'sub', 'deep'), { recursive: true });
    mkdirSync(outside, { recursive: true });
    writeFileSync(path.join(outside, 'secret.txt'), OUTSIDE_SECRET);
    writeFileSync(path.join(root, 'a.txt'), 'inside-a');
    writeFileSync(path.join(root, 'sub', 'deep', 'b.txt'), 'inside-b');
    symlinkSync(path.join(outside, 'secret.txt'), path.join(root, 'link_abs_out'));
    symlinkSync('../outside/secret.txt', path.join(root, 'link_rel_out'));
    symlinkSync(outside, path.join(root, 'dirlink_out'));
    symlinkSync('/', path.join(root, 'link_slash'));
    symlinkSync('/etc', path.join(root, 'link_etc'));
    symlinkSync('link_abs_out', path.join(root, 'chain1'));
    symlinkSync('chain1', path.join(root, 'chain2'));
    symlinkSync(path.join(outside, 'not-yet-there.txt'), path.join(root, 'dangling_out'));
    symlinkSync('../../..', path.join(root, 'sub', 'deep', 'up3'));
    symlinkSync('a.txt', path.join(root, 'link_in'));
    symlinkSync('sub', path.join(root, 'dirlink_in'));
    sut = new ToolSandbox({ allowedRoot: root, mode: 'process' });
  });
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  describe('path confinement', () => {
    const escapes: [string, () => string][] = [
      ['parent', () => '../outside/secret.txt'],
      ['parent twice', () => '../../etc/passwd'],
      ['up and down', () => 'sub/../../outside/secret.txt'],
      ['dot then parent', () => './../outside/secret.txt'],
      ['deep climb', () => 'sub/deep/../../../outside/secret.txt'],
      ['bare ..', () => '..'],
      ['.. with slash', () => '../'],
      ['double slashes', () => '..//..//etc/passwd'],
      ['dot segments', () => 'sub/./../..'],
      ['twenty parents', () => `${'../'.repeat(20)}etc/passwd`],
      ['parent of root by absolute', () => `${root}/../outside/secret.txt`],
      ['absolute /etc/passwd', () => '/etc/passwd'],
      ['absolute /etc/shadow', () => '/etc/shadow'],
      ['absolute /', () => '/'],
      ['absolute /root', () => '/root/.bashrc'],
      ['proc environ', () => '/proc/self/environ'],
      ['block device', () => '/dev/sda'],
      ['double-slash absolute', () => '//etc/passwd'],
      ['absolute outside file', () => path.join(outside, 'secret.txt')],
      ['sibling with root as prefix', () => `${root}-evil/x`],
      ['absolute /tmp', () => '/tmp/x'],
      ['symlink absolute out', () => 'link_abs_out'],
      ['symlink relative out', () => 'link_rel_out'],
      ['through dir symlink out', () => 'dirlink_out/secret.txt'],
      ['through / symlink', () => 'link_slash/etc/passwd'],
      ['through /etc symlink', () => 'link_etc/passwd'],
      ['symlink chain out', () => 'chain2'],
      ['dangling symlink out', () => 'dangling_out'],
      ['relative symlink climbing', () => 'sub/deep/up3/outside/secret.txt'],
      ['NUL byte', () => 'a.txt\0../../etc/passwd'],
      ['empty', () => ''],
    ];

    it.each(escapes)('file_read refuses %s', (_name, p) => {
      expect(() => sut.readFile(p())).toThrow(SandboxViolation);
    });

    it.each(escapes)('file_write refuses %s and writes nothing outside', (_name, p) => {
      const before = readdirSync(outside).sort();
      expect(() => sut.writeFile(p(), 'pwned')).toThrow(SandboxViolation);
      expect(readdirSync(outside).sort()).toEqual(before);
      expect(readFileSync(path.join(outside, 'secret.txt'), 'utf8')).toBe(OUTSIDE_SECRET);
    });

    const inside: [string, () => string, string][] = [
      ['plain', () => 'a.txt', 'inside-a'],
      ['dot prefix', () => './a.txt', 'inside-a'],
      ['down and up', () => 'sub/../a.txt', 'inside-a'],
      ['absolute inside', () => path.join(root, 'a.txt'), 'inside-a'],
      ['nested', () => 'sub/deep/b.txt', 'inside-b'],
      ['symlink inside', () => 'link_in', 'inside-a'],
      ['dir symlink inside', () => 'dirlink_in/deep/b.txt', 'inside-b'],
    ];
    it.each(inside)('file_read allows %s', (_n, p, content) => {
      expect(sut.readFile(p()).content).toBe(content);
    });

    it('file_write creates missing folders inside the root and reports the relative path', () => {
      expect(sut.writeFile('new/dir/c.txt', 'hello')).toEqual({ path: 'new/dir/c.txt', bytes: 5 });
      expect(readFileSync(path.join(root, 'new', 'dir', 'c.txt'), 'utf8')).toBe('hello');
      sut.writeFile('new/dir/c.txt', ' world', 'append');
      expect(sut.readFile('new/dir/c.txt').content).toBe('hello world');
    });

    it('file_read refuses a folder and a FIFO-like non-file', () => {
      expect(() => sut.readFile('sub')).toThrow(SandboxViolation);
    });

    it.each(['.', './', 'sub/..'])('the root itself (%j) is a folder, not a file outside the root', (p) => {
      expect(() => sut.readFile(p)).toThrow(/^not a regular file/);
      expect(() => sut.writeFile(p, 'x')).toThrow(/^not a regular file/);
    });

    /**
     * A sandbox whose attacker strikes once: right after the path check and before the open (`check`,
     * the default), or right before the file's folder is opened (`folder`, the moment a read of a path
     * that names the file itself checks nothing before).
     */
    const swappingSandbox = (swap: () => void, at: 'check' | 'folder' = 'check') => {
      let armed = true;
      const strike = () => {
        if (armed) swap();
        armed = false;
      };
      class Swapping extends ToolSandbox {
        override resolveExisting(p: string): string {
          const real = super.resolveExisting(p);
          if (at === 'check') strike();
          return real;
        }
        override resolveForWrite(p: string): string {
          const real = super.resolveForWrite(p);
          if (at === 'check') strike();
          return real;
        }
        protected override openFolder(folder: string, userPath: string): number {
          if (at === 'folder') strike();
          return super.openFolder(folder, userPath);
        }
      }
      return new Swapping({ allowedRoot: root, mode: 'process' });
    };
    const swapFileForOutsideLink = (name: string) => () => {
      unlinkSync(path.join(root, name));
      symlinkSync(path.join(outside, 'secret.txt'), path.join(root, name));
    };

    it('TOCTOU: a file swapped for a symlink to outside before it is opened is refused (read)', () => {
      writeFileSync(path.join(root, 'swap.txt'), 'fine');
      expect(() =>
        swappingSandbox(swapFileForOutsideLink('swap.txt'), 'folder').readFile('swap.txt'),
      ).toThrow(/outside the allowed root/);
      unlinkSync(path.join(root, 'swap.txt'));
    });

    it("TOCTOU: a link's target swapped for a symlink to outside after the link was resolved is refused (read)", () => {
      writeFileSync(path.join(root, 'swap-target.txt'), 'fine');
      symlinkSync('swap-target.txt', path.join(root, 'swap-link'));
      expect(swappingSandbox(() => undefined).readFile('swap-link').content).toBe('fine');
      expect(() => swappingSandbox(swapFileForOutsideLink('swap-target.txt')).readFile('swap-link')).toThrow(
        /became a symlink/,
      );
      unlinkSync(path.join(root, 'swap-link'));
      unlinkSync(path.join(root, 'swap-target.txt'));
    });

    it('TOCTOU: a file swapped for a symlink to outside after the check is refused (write), the outside file untouched', () => {
      writeFileSync(path.join(root, 'swapw.txt'), 'fine');
      expect(() =>
        swappingSandbox(swapFileForOutsideLink('swapw.txt')).writeFile('swapw.txt', 'pwned'),
      ).toThrow(SandboxViolation);
      expect(readFileSync(path.join(outside, 'secret.txt'), 'utf8')).toBe(OUTSIDE_SECRET);
      unlinkSync(path.join(root, 'swapw.txt'));
    });

    it('TOCTOU: a parent folder swapped for a symlink to outside after the check is refused', () => {
      mkdirSync(path.join(root, 'pdir'));
      writeFileSync(path.join(root, 'pdir', 'secret.txt'), 'fine');
      const swapDir = () => {
        renameSync(path.join(root, 'pdir'), path.join(root, 'pdir.old'));
        symlinkSync(outside, path.join(root, 'pdir'));
      };
      const restore = () => {
        unlinkSync(path.join(root, 'pdir'));
        renameSync(path.join(root, 'pdir.old'), path.join(root, 'pdir'));
      };
      expect(() => swappingSandbox(swapDir).writeFile('pdir/secret.txt', 'pwned')).toThrow(
        /outside the allowed root/,
      );
      expect(readFileSync(path.join(outside, 'secret.txt'), 'utf8')).toBe(OUTSIDE_SECRET);
      restore();
      expect(() => swappingSandbox(swapDir, 'folder').readFile('pdir/secret.txt')).toThrow(
        /outside the allowed root/,
      );
      restore();
    });

    it('TOCTOU race: reads while another process keeps swapping a file and a symlink never return outside content', async () => {
      const racer = spawn(
        '/bin/sh',
        [
          '-c',
          `cd '${root}' && while :; do ln -sfn '${path.join(outside, 'secret.txt')}' race.tmp && mv -fT race.tmp race.txt; echo ok > race.tmp2 && mv -fT race.tmp2 race.txt; done`,
        ],
        { stdio: 'ignore' },
      );
      try {
        await new Promise((r) => setTimeout(r, 50));
        let refused = 0;
        let read = 0;
        for (let i = 0; i < 400; i++) {
          try {
            const r = sut.readFile('race.txt');
            expect(r.content).not.toContain(OUTSIDE_SECRET);
            read++;
          } catch (e) {
            expect(e).toBeInstanceOf(SandboxViolation);
            refused++;
          }
          if (i % 50 === 0) await new Promise((r) => setImmediate(r));
        }
        expect(read + refused).toBe(400);
      } finally {
        racer.kill('SIGKILL');
      }
    });
  });

  describe('shell_exec (process mode)', () => {
    const secretEnv = {
      OPENAI_API_KEY: 'sk-leak-0001',
      RUNLEDGER_ADMIN_TOKEN: 'admintoken-leak-0002',
      AWS_SECRET_ACCESS_KEY: 'aws-leak-0003',
      GITHUB_TOKEN: 'ghp-leak-0004',
    };
    let saved: NodeJS.ProcessEnv;
    beforeAll(() => {
      saved = { ...process.env };
      Object.assign(process.env, secretEnv);
    });
    afterAll(() => {
      for (const k of Object.keys(secretEnv)) delete process.env[k];
      Object.assign(process.env, saved);
    });

    it.each(['env', 'printenv', 'set', 'export -p', 'cat /proc/self/environ | tr "\\0" "\\n"'])(
      '%s shows no secret or provider key, only PATH/HOME/LANG',
      async (cmd) => {
        const r = await sut.exec(cmd, { timeoutMs: 5000 });
        for (const v of Object.values(secretEnv)) expect(r.stdout + r.stderr).not.toContain(v);
        expect(r.stdout).not.toMatch(/OPENAI|RUNLEDGER_|AWS_|GITHUB_TOKEN|JEST|NODE_OPTIONS/);
        if (cmd === 'env')
          expect(r.stdout.trim().split('\n').sort()).toEqual([
            `HOME=${root}`,
            'LANG=C.UTF-8',
            `PATH=${sut.scrubbedEnv().PATH}`,
            `PWD=${root}`,
          ]);
      },
    );

    it('runs with cwd inside the root and refuses a cwd outside it', async () => {
      expect((await sut.exec('pwd', { timeoutMs: 5000, cwd: 'sub/deep' })).stdout.trim()).toBe(
        path.join(root, 'sub', 'deep'),
      );
      await expect(sut.exec('pwd', { timeoutMs: 5000, cwd: '..' })).rejects.toThrow(SandboxViolation);
      await expect(sut.exec('pwd', { timeoutMs: 5000, cwd: 'dirlink_out' })).rejects.toThrow(
        SandboxViolation,
      );
      await expect(sut.exec('pwd', { timeoutMs: 5000, cwd: '/etc' })).rejects.toThrow(SandboxViolation);
    });

    it('a command that ignores SIGTERM is still killed at the timeout, with its whole process group', async () => {
      const marker = `31.${Date.now() % 100000}`;
      const started = Date.now();
      const r = await sut.exec(
        `trap '' TERM; sh -c "trap '' TERM; sleep ${marker}" & sleep ${marker}; wait`,
        { timeoutMs: 300 },
      );
      expect(r.timed_out).toBe(true);
      expect(r.exit_code).toBeNull();
      expect(r.signal).toBe('SIGKILL');
      expect(Date.now() - started).toBeLessThan(5000);
      expect(processesWith(`sleep ${marker}`)).toEqual([]);
    });

    it('background children do not outlive the call', async () => {
      const marker = `32.${Date.now() % 100000}`;
      const r = await sut.exec(`(sleep ${marker} &) ; nohup sleep ${marker} >/dev/null 2>&1 & echo started`, {
        timeoutMs: 5000,
      });
      expect(r.stdout).toBe('started\n');
      await new Promise((res) => setTimeout(res, 50));
      expect(processesWith(`sleep ${marker}`)).toEqual([]);
    });

    it('a command left running when the service process is SIGKILLed dies with it', async () => {
      const marker = `34.${Date.now() % 100000}`;
      const script = `const { ToolSandbox } = require('./libs/tools/src/sandbox.ts');
        new ToolSandbox({ allowedRoot: ${JSON.stringify(root)}, mode: 'process' }).exec('sleep ${marker}', { timeoutMs: 60000 });
        setTimeout(() => console.log('started'), 300);`;
      const service = spawn(process.execPath, ['-r', '@swc-node/register', '-e', script], {
        cwd: path.resolve(__dirname, '../../..'),
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      await new Promise<void>((resolve) => service.stdout!.on('data', () => resolve()));
      expect(processesWith(`sleep ${marker}`).length).toBeGreaterThan(0);
      service.kill('SIGKILL');
      const deadline = Date.now() + 5000;
      while (processesWith(`sleep ${marker}`).length > 0 && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 100));
      expect(processesWith(`sleep ${marker}`)).toEqual([]);
    });

    it('output is capped at maxOutputBytes and marked truncated', async () => {
      const capped = new ToolSandbox({ allowedRoot: root, mode: 'process', maxOutputBytes: 1000 });
      const r = await capped.exec("head -c 100000 /dev/zero | tr '\\0' a; echo tail >&2", {
        timeoutMs: 5000,
      });
      expect(r.truncated).toBe(true);
      expect(r.stdout.length + r.stderr.length).toBeLessThanOrEqual(1000);
      expect(r.stdout).toMatch(/^a+$/);
      expect(r.exit_code).toBe(0);
    });

    it('an output flood is killed once it passes the flood limit, long before the timeout', async () => {
      const capped = new ToolSandbox({
        allowedRoot: root,
        mode: 'process',
        maxOutputBytes: 4096,
        floodLimitBytes: 1_000_000,
      });
      const started = Date.now();
      const r = await capped.exec('yes flood', { timeoutMs: 20_000 });
      expect(r.flooded).toBe(true);
      expect(r.truncated).toBe(true);
      expect(r.timed_out).toBe(false);
      expect(r.stdout.length).toBeLessThanOrEqual(4096);
      expect(Date.now() - started).toBeLessThan(10_000);
    });

    it('aborting the signal kills the command', async () => {
      const ac = new AbortController();
      const p = sut.exec('sleep 30', { timeoutMs: 20_000, signal: ac.signal });
      setTimeout(() => ac.abort(), 50);
      const r = await p;
      expect(r.cancelled).toBe(true);
      expect(r.exit_code).toBeNull();
    });
  });

  describe('shell_exec tool', () => {
    let registry: PluginToolRegistry;
    beforeAll(() => {
      registry = PluginToolRegistry.load({ services: { sandbox: sut, memory: null } });
    });

    it.each([
      'sudo ls',
      'sudo -u root id',
      'ls && sudo rm x',
      'echo $(sudo cat /etc/shadow)',
      'bash -c "sudo id"',
      '/usr/bin/sudo id',
      'env sudo id',
      'timeout 5 sudo id',
      'doas id',
      'su -c id',
    ])('refuses %s without a sudo secret for this call', async (command) => {
      const r = await registry.invoke('shell_exec', { command }, ctx());
      expect(r).toMatchObject({ ok: false, metadata: { error_kind: 'permission_denied' } });
      expect(r.error).toMatch(/sudo refused/);
    });

    it('with a sudo secret the call runs (sudo itself may be absent), and the password is never echoed', async () => {
      const pw = 'Sudo-Pa55word!';
      const r = await registry.invoke(
        'shell_exec',
        { command: 'sudo -S true; cat; echo "$0"' },
        ctx({ sudo_password: pw }),
      );
      expect(r.error ?? '').not.toMatch(/sudo refused/);
      expect(JSON.stringify(r)).not.toContain(pw);
    });

    it('a secret printed by the command (also base64 and percent-encoded) is redacted from the result', async () => {
      const token = 'tok_9f8e7d6c5b4a';
      const r = await registry.invoke(
        'shell_exec',
        {
          command: `printf '%s\\n' '${token}'; printf '%s' '${token}' | base64; printf 'user:${token}' | base64; echo '${encodeURIComponent(token + '/x')}'`,
        },
        ctx({ api_token: token }),
      );
      const text = JSON.stringify(r);
      expect(text).not.toContain(token);
      expect(text).not.toContain(Buffer.from(token).toString('base64').slice(0, 16));
      expect(text).toContain('[REDACTED]');
    });
  });

  // Skipped only where bubblewrap is missing or the kernel refuses it namespaces, checked
  // independently of ToolSandbox's own arguments (a bug in those must fail, not skip).
  const bwrap = findOnPath('bwrap');
  const namespacesWork =
    bwrap !== null && spawnSync(bwrap, ['--unshare-all', '--ro-bind', '/', '/', '/bin/true']).status === 0;
  (namespacesWork ? describe : describe.skip)('shell_exec under bubblewrap', () => {
    let sandboxed: ToolSandbox;
    beforeAll(() => {
      sandboxed = new ToolSandbox({ allowedRoot: root, mode: 'bwrap' });
    });

    it('is in effect', () => {
      expect(sandboxed.sandboxStatus()).toMatchObject({
        requested: 'bwrap',
        effective: 'bwrap',
        warning: null,
      });
    });

    it('sees the root read-write and nothing else of the host', async () => {
      const r = await sandboxed.exec(
        `echo made > made.txt && cat made.txt && ls / && cat '${path.join(outside, 'secret.txt')}'; ls /home /root /work 2>&1; cat /etc/shadow 2>&1; touch /usr/pwned 2>&1; echo done`,
        { timeoutMs: 10_000 },
      );
      expect(r.stdout).toContain('made\n');
      expect(readFileSync(path.join(root, 'made.txt'), 'utf8')).toBe('made\n');
      expect(r.stdout + r.stderr).not.toContain(OUTSIDE_SECRET);
      expect(r.stdout).toMatch(/No such file|cannot access/);
      expect(r.stdout).toMatch(/Read-only file system/);
      expect(existsSync('/usr/pwned')).toBe(false);
      const top = r.stdout.split('\n');
      expect(top).not.toContain('home');
      expect(top).not.toContain('root');
      expect(r.stdout).toContain('done');
    });

    it('has no network', async () => {
      const server = createServer((s) => s.end('hello-from-host\n'));
      await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
      const port = (server.address() as { port: number }).port;
      try {
        const r = await sandboxed.exec(
          `bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port} && cat <&3' 2>&1; ls /sys/class/net 2>/dev/null; echo end`,
          { timeoutMs: 10_000 },
        );
        expect(r.stdout).not.toContain('hello-from-host');
        expect(r.stdout).toMatch(/refused|unreachable|cannot|No such/i);
      } finally {
        server.close();
      }
    });

    it('shows no host environment and no host processes', async () => {
      process.env.OPENAI_API_KEY = 'sk-bwrap-leak-9';
      try {
        const r = await sandboxed.exec(
          'env; for f in /proc/[0-9]*/environ; do cat "$f" 2>/dev/null | tr "\\0" "\\n"; done; ls /proc | grep -c "^[0-9]"',
          { timeoutMs: 10_000 },
        );
        expect(r.stdout).not.toContain('sk-bwrap-leak-9');
        expect(r.stdout).not.toMatch(/OPENAI|JEST/);
        // only the sandbox's own few processes
        expect(Number(r.stdout.trim().split('\n').pop())).toBeLessThan(10);
      } finally {
        delete process.env.OPENAI_API_KEY;
      }
    });

    it('kills a SIGTERM-ignoring command and its children at the timeout', async () => {
      const marker = `33.${Date.now() % 100000}`;
      const r = await sandboxed.exec(`trap '' TERM; sleep ${marker} & sleep ${marker}`, { timeoutMs: 300 });
      expect(r.timed_out).toBe(true);
      await new Promise((res) => setTimeout(res, 100));
      expect(processesWith(`sleep ${marker}`)).toEqual([]);
    });
  });

  describe('sandbox mode', () => {
    it('bwrap required but missing fails closed: shell commands are refused', async () => {
      const s = new ToolSandbox({ allowedRoot: root, mode: 'bwrap', bwrapPath: null });
      expect(s.sandboxStatus()).toMatchObject({
        effective: 'unavailable',
        warning: expect.stringContaining('refused'),
      });
      await expect(s.exec('echo hi', { timeoutMs: 1000 })).rejects.toThrow(SandboxViolation);
    });

    it('auto without bwrap runs process-level with a warning (logged and in the status)', async () => {
      const warnings: string[] = [];
      const s = new ToolSandbox({
        allowedRoot: root,
        mode: 'auto',
        bwrapPath: null,
        logger: { warn: (_o, m) => warnings.push(m) },
      });
      expect(s.sandboxStatus()).toMatchObject({
        effective: 'process',
        warning: expect.stringContaining('without the OS sandbox'),
      });
      expect(warnings).toHaveLength(1);
      expect((await s.exec('echo hi', { timeoutMs: 5000 })).stdout).toBe('hi\n');
    });

    it('auto with a broken bwrap falls back to process mode', () => {
      const s = new ToolSandbox({ allowedRoot: root, mode: 'auto', bwrapPath: '/bin/false' });
      expect(s.sandboxStatus()).toMatchObject({
        effective: 'process',
        warning: expect.stringContaining('does not work'),
      });
    });
  });
});
