/**
 * npm run bench -- tools
 * What the tool layer costs: a sandboxed shell call (process and bubblewrap) against a bare
 * `sh -c`, secret redaction against a plain replaceAll, and a permission check against a bare
 * shell-quote parse of the same command.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse as shellQuoteParse } from 'shell-quote';
import { RulePermissionPolicy } from '@runledger/permissions';
import { findOnPath, redactSecrets, ToolSandbox } from '@runledger/tools';

const now = () => Number(process.hrtime.bigint()) / 1e6;

async function timeIt(n: number, fn: () => Promise<unknown> | unknown): Promise<number> {
  await fn();
  const t0 = now();
  for (let i = 0; i < n; i++) await fn();
  return (now() - t0) / n;
}

const bareShell = () =>
  new Promise<void>((resolve, reject) => {
    const c = spawn('/bin/sh', ['-c', 'true'], { stdio: 'ignore' });
    c.once('error', reject);
    c.once('close', () => resolve());
  });

export async function main(): Promise<void> {
  const root = mkdtempSync(path.join(tmpdir(), 'rl-bench-tools-'));
  try {
    const n = 40;
    const base = await timeIt(n, bareShell);
    console.log(`shell: bare sh -c true            ${base.toFixed(2)} ms/call (baseline)`);
    const proc = new ToolSandbox({ allowedRoot: root, mode: 'process' });
    const p = await timeIt(n, () => proc.exec('true', { timeoutMs: 10_000 }));
    console.log(`shell: ToolSandbox process mode   ${p.toFixed(2)} ms/call  x${(p / base).toFixed(2)}`);
    if (findOnPath('bwrap')) {
      const bw = new ToolSandbox({ allowedRoot: root, mode: 'bwrap' });
      if (bw.sandboxStatus().effective === 'bwrap') {
        const b = await timeIt(n, () => bw.exec('true', { timeoutMs: 10_000 }));
        console.log(`shell: ToolSandbox bwrap mode     ${b.toFixed(2)} ms/call  x${(b / base).toFixed(2)}`);
      } else console.log(`shell: bwrap unusable here: ${bw.sandboxStatus().warning}`);
    } else console.log('shell: bwrap not installed, bwrap mode not measured');

    const secret = 'hunter2-Secret!';
    const text = `${'lorem ipsum dolor sit amet '.repeat(2400)}${secret} ${Buffer.from(secret).toString('base64')}`;
    const kb = (text.length / 1024).toFixed(0);
    const m = 200;
    const plain = await timeIt(m, () => text.replaceAll(secret, '[REDACTED]'));
    console.log(`redact: replaceAll, ${kb} KiB      ${(plain * 1000).toFixed(1)} us (baseline)`);
    const one = await timeIt(m, () => redactSecrets(text, [secret]));
    console.log(
      `redact: redactSecrets, 1 secret   ${(one * 1000).toFixed(1)} us  x${(one / plain).toFixed(1)}`,
    );
    const three = await timeIt(m, () =>
      redactSecrets(text, [secret, 'tok_abcdef123456', 'correct horse battery']),
    );
    console.log(
      `redact: redactSecrets, 3 secrets  ${(three * 1000).toFixed(1)} us  x${(three / plain).toFixed(1)}`,
    );

    const policy = new RulePermissionPolicy({ allowedRoot: root });
    const commands = [
      'ls -la',
      'cat a.txt | grep foo && echo done',
      "bash -c 'timeout 5 nice rm -rf /tmp/x'",
      'echo $(git status) > out.txt; find . -name "*.ts" -exec wc -l {} +',
    ];
    const k = 2000;
    const sq = await timeIt(k, () => commands.forEach((c) => shellQuoteParse(c)));
    console.log(`policy: shell-quote parse x4      ${(sq * 1000).toFixed(1)} us (baseline)`);
    const pol = await timeIt(k, () => commands.forEach((c) => policy.checkShellCommand(c)));
    console.log(`policy: checkShellCommand x4      ${(pol * 1000).toFixed(1)} us  x${(pol / sq).toFixed(1)}`);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
