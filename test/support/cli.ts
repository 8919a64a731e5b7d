import { ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RuntimeEvent } from '@runledger/contracts';
import { SqliteEventStore, openSqlite } from '@runledger/event-store';

/**
 * `runledger` as the tests start it: the compiled tree jest's global setup made of the current sources
 * (scripts/test-build.js), or bin/runledger.js from the sources when a run has none.
 */
export const CLI = process.env.RUNLEDGER_TEST_BUILD
  ? join(process.env.RUNLEDGER_TEST_BUILD, 'runledger.js')
  : join(__dirname, '..', '..', 'bin', 'runledger.js');

/**
 * What every CLI child gets. `auto` keeps a writer thread off when running the TypeScript sources, as
 * the tests did before they had a compiled tree: a spec that means the thread asks for it.
 */
export const CLI_ENV: Record<string, string> = {
  RUNLEDGER_FROM_SOURCE: '1',
  LOG_LEVEL: 'silent',
  RUNLEDGER_SQLITE_WRITER_THREAD: process.env.RUNLEDGER_SQLITE_WRITER_THREAD ?? 'off',
};

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Start `runledger <args>` as a real child process (see CLI), stdin closed, so it has no terminal. */
export function spawnCli(
  args: readonly string[],
  options: { cwd: string; env?: Record<string, string> },
): { child: ChildProcess; done: Promise<CliResult> } {
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd: options.cwd,
    env: { ...process.env, ...CLI_ENV, ...options.env },
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

/** The address `runledger serve` prints on stderr once it listens; rejects when it exits or takes too long. */
export async function servedUrl(child: ChildProcess, timeoutMs = 30_000): Promise<string> {
  let stderr = '';
  const read = (c: Buffer) => (stderr += c.toString('utf8'));
  child.stderr!.on('data', read);
  try {
    const deadline = Date.now() + timeoutMs;
    let url: string | undefined;
    while (!(url = /dashboard: (http:\/\/[^/\s]+)/.exec(stderr)?.[1])) {
      if (child.exitCode !== null || Date.now() > deadline)
        throw new Error(`server did not start: ${stderr}`);
      await new Promise((r) => setTimeout(r, 25));
    }
    return url;
  } finally {
    child.stderr!.off('data', read);
  }
}

export const runCli = (
  args: readonly string[],
  options: { cwd: string; env?: Record<string, string> },
): Promise<CliResult> => spawnCli(args, options).done;

/** What `auto` prints when this machine cannot give the OS sandbox (no bubblewrap, or bwrap unusable here). */
const SANDBOX_FALLBACK_NOTICE =
  /^runledger: .*: shell commands run without the OS sandbox \(process-level confinement only\)(; with --yes, .*)?$/;

/**
 * The lines of a CLI's stderr that report a problem: its `runledger: ...` diagnostics and anything Node
 * printed (warnings, stack frames). Progress lines are not problems, nor is the sandbox fallback
 * notice, which depends on the machine (scripts/pretest.js installs bubblewrap where it can).
 */
export function stderrProblems(stderr: string): string[] {
  return stderr
    .split('\n')
    .filter(
      (line) =>
        (/^runledger: /.test(line) && !SANDBOX_FALLBACK_NOTICE.test(line)) ||
        /^\(node:\d+\)/.test(line) ||
        /^\s+at /.test(line),
    );
}

/** A CLI spec's folder: a fresh temp dir per test, the scripted model's file in it and the env naming both. */
export interface ScriptedCliFolder {
  readonly dir: string;
  /** where the spec writes the scripted model's script */
  readonly script: string;
  /** RUNLEDGER_DB and RUNLEDGER_MODEL in `dir`, then the spec's own settings; a test may change it for its run */
  readonly env: Record<string, string>;
}

/**
 * Registers a beforeEach that makes the folder (named from `prefix`) and its env, and an afterEach that
 * removes it. Read the fields through the returned getters: they change with every test.
 */
export function useScriptedCliFolder(prefix: string, settings: Record<string, string>): ScriptedCliFolder {
  let current: ScriptedCliFolder | undefined;
  beforeEach(() => {
    const dir = mkdtempSync(join(tmpdir(), prefix));
    const script = join(dir, 'script.json');
    current = {
      dir,
      script,
      env: {
        RUNLEDGER_DB: join(dir, 'data', 'runledger.db'),
        RUNLEDGER_MODEL: `scripted:${script}`,
        ...settings,
      },
    };
  });
  afterEach(() => {
    if (current) rmSync(current.dir, { recursive: true, force: true });
    current = undefined;
  });
  const folder = (): ScriptedCliFolder => {
    if (!current) throw new Error('useScriptedCliFolder: the folder is only there inside a test');
    return current;
  };
  return {
    get dir() {
      return folder().dir;
    },
    get script() {
      return folder().script;
    },
    get env() {
      return folder().env;
    },
  };
}

/**
 * `runledger run <input> --yes` against a model server that `stopModel` then shuts down, whatever happened:
 * the run must complete cleanly with `answer` on stdout. Returns the task id, for an offline replay.
 */
export async function runThenStopModel(
  input: string,
  options: { cwd: string; env: Record<string, string>; answer: string; stopModel: () => Promise<unknown> },
): Promise<string> {
  try {
    const run = await runCli(['run', input, '--yes'], { cwd: options.cwd, env: options.env });
    expect(stderrProblems(run.stderr)).toEqual([]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(options.answer);
    return /task (task_\w+) received/.exec(run.stderr)![1];
  } finally {
    await options.stopModel();
  }
}

/** A task's whole stream, read from the SQLite file a CLI run wrote (the handle closed again). */
export async function readTaskLog(dbPath: string, taskId: string): Promise<RuntimeEvent[]> {
  const handle = openSqlite({ path: dbPath });
  try {
    return await new SqliteEventStore(handle).readWholeStream(taskId);
  } finally {
    await handle.close();
  }
}
