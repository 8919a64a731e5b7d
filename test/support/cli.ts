import { ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';

export const CLI = join(__dirname, '..', '..', 'bin', 'runledger.js');

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Start `runledger <args>` as a real child process (from source), stdin closed, so it has no terminal. */
export function spawnCli(
  args: readonly string[],
  options: { cwd: string; env?: Record<string, string> },
): { child: ChildProcess; done: Promise<CliResult> } {
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd: options.cwd,
    env: { ...process.env, RUNLEDGER_FROM_SOURCE: '1', LOG_LEVEL: 'silent', ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  const done = new Promise<CliResult>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr })),
  );
  return { child, done };
}

export const runCli = (
  args: readonly string[],
  options: { cwd: string; env?: Record<string, string> },
): Promise<CliResult> => spawnCli(args, options).done;
