import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { Server, createServer } from 'node:http';
import { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readTaskLog, runCli, stderrProblems, useScriptedCliFolder } from '@runledger/testing';

/**
 * `runledger run ... --yes` where bubblewrap is not there (the process sandbox fallback), as real
 * child processes: --yes answers the prompts the parser can keep inside the allowed root, and refuses
 * the ones only an OS sandbox would contain (reads outside, other processes' data, writes through
 * paths the shell settles, interpreters, the network), unless the permission rules name them.
 */

jest.setTimeout(90_000);

const shell = (command: string) => JSON.stringify({ type: 'tool', tool: 'shell_exec', args: { command } });
const respond = (content: string) => JSON.stringify({ type: 'respond', content });
const SECRET = 'TOP-SECRET-7f3a';

describe('--yes with the process sandbox fallback (no bubblewrap)', () => {
  const cli = useScriptedCliFolder('rl-yes-nobwrap-', { RUNLEDGER_CRITIC: 'off', RUNLEDGER_SANDBOX: 'auto' });
  let outside: string;
  let server: Server;
  let hits: number;
  let port: number;
  beforeEach(async () => {
    outside = mkdtempSync(join(tmpdir(), 'rl-yes-outside-'));
    writeFileSync(join(outside, 'secret.txt'), SECRET);
    hits = 0;
    server = createServer((_req, res) => {
      hits += 1;
      res.end(SECRET);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterEach(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    rmSync(outside, { recursive: true, force: true });
  });

  /** no bubblewrap on this PATH: `auto` falls back to the process sandbox, as on a machine without it */
  const withoutBwrap = (extra: Record<string, string> = {}) => {
    const bin = join(cli.dir, '.no-bwrap-bin');
    mkdirSync(bin, { recursive: true });
    return { ...cli.env, PATH: bin, ...extra };
  };

  it('refuses every escape the OS sandbox would have stopped, runs what stays inside, and the fallback line says so', async () => {
    // $HOME is the allowed root in the process sandbox: its parent holds the outside folder too
    const besideHome = `$HOME/../${outside.split('/').pop()!}`;
    const escapes = [
      `cat ${outside}/secret.txt`,
      'cat /etc/shadow',
      'cat /proc/$PPID/environ',
      'cat /proc/1/environ',
      `echo pwned > ${besideHome}/home.txt`,
      `ln -s ${outside} out && echo pwned > out/link.txt`,
      `perl -e 'open(F, ">${outside}/perl.txt"); print F "pwned"'`,
      `node -e 'require("fs").writeFileSync("${outside}/node.txt", "pwned")'`,
      `curl -s http://127.0.0.1:${port}/`,
    ];
    writeFileSync(
      cli.script,
      JSON.stringify({
        orchestrator: [...escapes.map(shell), shell('echo kept > inside.txt'), respond('done')],
      }),
    );
    const run = await runCli(
      ['run', 'try to get out', '--yes', '--budget', 'max_failures=20', '--budget', 'max_rounds=20'],
      {
        cwd: cli.dir,
        env: withoutBwrap({ RUNLEDGER_MAX_ROUNDS: '20' }),
      },
    );
    expect(stderrProblems(run.stderr)).toEqual([]);
    expect(run.code).toBe(0);
    const fallback = run.stderr
      .split('\n')
      .filter((l) => l.includes('without the OS sandbox (process-level'));
    expect(fallback).toEqual([
      expect.stringMatching(
        /; with --yes, reads and writes outside the allowed root, other processes' data and the network stay refused unless the permission rules name them$/,
      ),
    ]);
    expect(run.stderr.match(/--yes refused shell_exec/g)).toHaveLength(escapes.length);

    // nothing got out: no file written outside, no request reached the port, no secret in the log
    expect(readdirSync(outside)).toEqual(['secret.txt']);
    expect(hits).toBe(0);
    expect(readFileSync(join(cli.dir, 'inside.txt'), 'utf8')).toBe('kept\n');
    expect(existsSync(join(cli.dir, 'out'))).toBe(false);
    const events = await readTaskLog(cli.env.RUNLEDGER_DB, /task (task_\w+) received/.exec(run.stderr)![1]);
    expect(JSON.stringify(events)).not.toContain(SECRET);
    const decisions = events.flatMap((e) => (e.type === 'PERMISSION_RESOLVED' ? [e.payload.decision] : []));
    expect(decisions).toEqual([...escapes.map(() => 'deny'), 'allow_once']);
  });

  it('what the permission rules name, --yes allows: a network program they list runs', async () => {
    writeFileSync(
      cli.script,
      JSON.stringify({ orchestrator: [shell(`curl -s http://127.0.0.1:${port}/`), respond('fetched')] }),
    );
    const run = await runCli(['run', 'fetch it', '--yes'], {
      cwd: cli.dir,
      env: withoutBwrap({ RUNLEDGER_PERMISSION_RULES: JSON.stringify({ prompt_programs: ['curl'] }) }),
    });
    expect(run.code).toBe(0);
    expect(run.stderr).not.toContain('--yes refused');
    expect(hits).toBe(1);
  });
});
