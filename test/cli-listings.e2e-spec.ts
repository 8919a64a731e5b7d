import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli, spawnCli } from '@runledger/testing';

/**
 * `runledger tasks` and `runledger events <id> [--follow]` (real child processes): what the log holds,
 * read from the same database the tasks were run on, and followed while another process ends a task.
 */

jest.setTimeout(240_000);

describe('runledger tasks / events', () => {
  let dir: string;
  let env: Record<string, string>;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'rl-cli-listings-'));
    env = { RUNLEDGER_DB: join(dir, 'data', 'runledger.db'), RUNLEDGER_MODEL: 'sys_util' };
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('lists tasks newest first, filters them, prints a task’s events, and follows one to its end', async () => {
    const done = await runCli(['run', 'run echo listed'], { cwd: dir, env });
    expect(done.code).toBe(0);
    const doneId = /task (task_\w+) received/.exec(done.stderr)![1];
    const waiting = await runCli(['run', 'write later.txt: from the follow'], { cwd: dir, env });
    expect(waiting.code).toBe(3);
    const [, waitId, requestId] = /runledger resolve (\S+) (\S+) /.exec(waiting.stderr)!;

    const tasks = await runCli(['tasks'], { cwd: dir, env });
    expect(tasks.code).toBe(0);
    const rows = tasks.stdout.trim().split('\n');
    expect(rows).toHaveLength(2);
    expect(rows[0]).toMatch(
      new RegExp(`^${waitId}\\s+awaiting_permission\\s+-\\s+\\S+\\s+write later\\.txt`),
    );
    expect(rows[1]).toMatch(new RegExp(`^${doneId}\\s+completed\\s+completed\\s+\\S+\\s+run echo listed$`));

    const json = await runCli(['tasks', '--status', 'completed', '--json'], { cwd: dir, env });
    const page = JSON.parse(json.stdout) as { tasks: { task_id: string }[]; next_cursor: string | null };
    expect(page.tasks.map((t) => t.task_id)).toEqual([doneId]);
    const limited = await runCli(['tasks', '--limit', '1'], { cwd: dir, env });
    expect(limited.stdout.trim().split('\n')).toHaveLength(1);
    expect(limited.stderr).toContain('raise --limit');

    const events = await runCli(['events', doneId], { cwd: dir, env });
    expect(events.code).toBe(0);
    const lines = events.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^ {3}1 {2}\S+ {2}TASK_RECEIVED {2}▶ task task_\w+ received: run echo listed$/);
    expect(lines[lines.length - 1]).toMatch(/^\s*\d+ {2}\S+ {2}TASK_COMPLETED/);
    expect(lines.map((l) => Number(l.trim().split(/\s+/)[0]))).toEqual(lines.map((_, i) => i + 1));

    // followed by one process while another answers the task's question: the follow ends with the task
    const follow = spawnCli(['events', waitId, '--follow', '--json'], { cwd: dir, env });
    await new Promise<void>((resolve) => {
      const seen = (chunk: Buffer) => {
        if (!chunk.toString('utf8').includes('TASK_AWAITING_PERMISSION')) return;
        follow.child.stdout!.off('data', seen);
        resolve();
      };
      follow.child.stdout!.on('data', seen);
    });
    const resolved = await runCli(['resolve', waitId, requestId, 'allow_once'], { cwd: dir, env });
    expect(resolved.code).toBe(0);
    const followed = await follow.done;
    expect(followed.code).toBe(0);
    const types = followed.stdout
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { type: string }).type);
    expect(types[0]).toBe('TASK_RECEIVED');
    expect(types).toContain('PERMISSION_RESOLVED');
    expect(types[types.length - 1]).toBe('TASK_COMPLETED');
    expect(readFileSync(join(dir, 'later.txt'), 'utf8')).toBe('from the follow');
  });

  it('an unknown task and bad options are clear errors', async () => {
    const unknown = await runCli(['events', 'task_nope'], { cwd: dir, env });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('task task_nope not found');
    const limit = await runCli(['tasks', '--limit', '0'], { cwd: dir, env });
    expect(limit.code).toBe(2);
    expect(limit.stderr).toContain('--limit must be a whole number from 1 to 500');
    const status = await runCli(['tasks', '--status', 'done'], { cwd: dir, env });
    expect(status.code).toBe(2);
    expect(status.stderr).toContain("'done' is invalid");
  });
});
