import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventPayloads, RuntimeEvent } from '@runledger/contracts';
import { SqliteEventStore, openSqlite } from '@runledger/event-store';
import { replayView } from '@runledger/runtime';
import { createSqliteStorage } from '@runledger/state-store';
import { CLI, CLI_ENV, readTaskLog, runCli, spawnCli, stderrProblems } from '@runledger/testing';

/** Tasks a process accepted and then lost (killed before its first step): only TASK_RECEIVED is in the log. */
async function receivedOnly(dbPath: string, inputs: string[]): Promise<string[]> {
  const storage = await createSqliteStorage({ path: dbPath });
  try {
    const ids: string[] = [];
    for (const [i, input] of inputs.entries()) {
      const id = `task_lost${i}`;
      await storage.eventStore.append(
        id,
        [
          {
            type: 'TASK_RECEIVED',
            payload: EventPayloads.TASK_RECEIVED.parse({ input, session_id: `sess_lost${i}`, source: 'cli' }),
          },
        ],
        { expected: 'no_stream' },
      );
      ids.push(id);
    }
    return ids;
  } finally {
    await storage.close();
  }
}

const streamOf = readTaskLog;

async function readTask(dbPath: string): Promise<RuntimeEvent[]> {
  const handle = openSqlite({ path: dbPath });
  try {
    const store = new SqliteEventStore(handle);
    const [received] = await store.readAll({ types: ['TASK_RECEIVED'] });
    return await store.readWholeStream(received.task_id);
  } finally {
    await handle.close();
  }
}

describe('runledger CLI (real child process, no model configured)', () => {
  let dir: string;
  let env: Record<string, string>;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'rl-cli-'));
    env = { RUNLEDGER_DB: join(dir, 'data', 'runledger.db'), RUNLEDGER_MODEL: 'sys_util' };
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('run "run echo hello then read <file>" completes with the events in order, gap-free', async () => {
    writeFileSync(join(dir, 'notes.txt'), 'contents of notes');
    const res = await runCli(['run', 'run echo hello then read notes.txt', '--yes'], { cwd: dir, env });
    expect(stderrProblems(res.stderr)).toEqual([]);
    expect(res.code).toBe(0);
    expect(res.stderr).toContain('stop reason: completed');
    expect(res.stdout).toContain('contents of notes');
    expect(res.stderr).toMatch(/rounds 2 · tool calls 2/);
    // sys_util is no model: its answers say so, and the task used no tokens
    expect(res.stderr).toMatch(/orchestrator answered in \d+ ms \(no model, no tokens\)/);
    expect(res.stderr).not.toContain('(0 tokens)');
    expect(res.stderr).toMatch(/model calls 2 · tokens 0 \(prompt 0, completion 0\)/);

    const events = await readTask(env.RUNLEDGER_DB);
    expect(events.map((e) => e.sequence)).toEqual(events.map((_, i) => i + 1));
    const order = [
      'TASK_RECEIVED',
      'CONTEXT_BUILT',
      'ROUTER_DECIDED',
      'PLAN_STARTED',
      'STEP_STARTED',
      'TOOL_CALLED',
      'TOOL_COMPLETED',
      'STEP_COMPLETED',
      'TASK_COMPLETED',
    ];
    const firstIndex = order.map((t) => events.findIndex((e) => e.type === t));
    expect(firstIndex.every((i) => i >= 0)).toBe(true);
    expect([...firstIndex].sort((a, b) => a - b)).toEqual(firstIndex);
    expect(events[events.length - 1]).toMatchObject({
      type: 'TASK_COMPLETED',
      payload: { stop_reason: 'completed' },
    });
    const calls = events
      .filter((e) => e.type === 'TOOL_CALLED')
      .map((e) => (e.type === 'TOOL_CALLED' ? e.payload.tool : ''));
    expect(calls).toEqual(['shell_exec', 'file_read']);
  });

  it('a command printing 60 KB completes under the default prompt budget; the prompt shows it elided', async () => {
    const res = await runCli(['run', "run head -c 60000 /dev/zero | tr '\\000' a", '--yes'], {
      cwd: dir,
      env,
    });
    expect(stderrProblems(res.stderr)).toEqual([]);
    expect(res.stderr).toContain('stop reason: completed');
    expect(res.code).toBe(0);
    expect(res.stdout).toContain('a'.repeat(60_000));

    const events = await readTask(env.RUNLEDGER_DB);
    const built = events.flatMap((e) => (e.type === 'CONTEXT_BUILT' ? [e.payload] : []));
    expect(built.map((b) => b.round)).toEqual([1, 2]);
    expect(built[1].cut).toContain('history:round_1:elided');
    for (const b of built) expect(b.total_tokens).toBeLessThanOrEqual(b.budget_tokens);
  });

  it('--json prints every event as a JSON line and a summary on stdout, and no progress lines', async () => {
    const res = await runCli(['run', 'run echo json', '--json', '--yes'], { cwd: dir, env });
    expect(res.code).toBe(0);
    expect(stderrProblems(res.stderr)).toEqual([]);
    expect(res.stderr).not.toContain('stop reason');
    const lines = res.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type?: string; summary?: { stop_reason: string } });
    expect(lines[0].type).toBe('TASK_RECEIVED');
    expect(lines[lines.length - 2].type).toBe('TASK_COMPLETED');
    expect(lines[lines.length - 1].summary?.stop_reason).toBe('completed');
  });

  it('exits 1 when the task does not complete, 2 on bad usage', async () => {
    const script = join(dir, 'script.json');
    writeFileSync(script, JSON.stringify({ orchestrator: [{ error: 'provider_error' }] }));
    const failed = await runCli(['run', 'write a poem', '--model', `scripted:${script}`], { cwd: dir, env });
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain('stop reason: provider_error');
    expect(failed.stdout).toBe('');
    const usage = await runCli(['run'], { cwd: dir, env });
    expect(usage.code).toBe(2);
    expect(usage.stderr).toBe("runledger: missing required argument 'input'; see runledger run --help\n");
    const badBudget = await runCli(['run', 'x', '--budget', 'max_rounds=abc'], { cwd: dir, env });
    expect(badBudget.code).toBe(2);
  });

  it('--budget max_rounds caps the task', async () => {
    const script = join(dir, 'script.json');
    writeFileSync(
      script,
      JSON.stringify({
        orchestrator: Array(5).fill('{"type":"tool","tool":"file_read","args":{"path":"x.txt"}}'),
      }),
    );
    writeFileSync(join(dir, 'x.txt'), 'x');
    const res = await runCli(
      ['run', 'loop', '--model', `scripted:${script}`, '--budget', 'max_rounds=2', '--yes'],
      { cwd: dir, env },
    );
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('stop reason: budget_exceeded');
    expect(res.stderr).toMatch(/rounds 2 ·/);
  });

  it('with no terminal a prompt leaves the task awaiting_permission and says how to resolve it; resolve finishes it', async () => {
    const waiting = await runCli(['run', 'write hello.txt: hi there'], { cwd: dir, env });
    expect(waiting.code).toBe(3);
    expect(waiting.stderr).toContain('awaiting_permission');
    expect(waiting.stdout).toBe('');
    // what allow_always would let through is said before anyone answers
    expect(waiting.stderr).toContain(
      'allow always: file_write, writes to any file under the allowed root, for this session (rule write_inside_root)',
    );
    const how = /runledger resolve (\S+) (\S+) /.exec(waiting.stderr);
    expect(how).not.toBeNull();
    expect(existsSync(join(dir, 'hello.txt'))).toBe(false);

    const resolved = await runCli(['resolve', how![1], how![2], 'allow_once'], {
      cwd: dir,
      env,
    });
    expect(resolved.code).toBe(0);
    expect(readFileSync(join(dir, 'hello.txt'), 'utf8')).toBe('hi there');
    const again = await runCli(['resolve', how![1], how![2], 'allow_once'], { cwd: dir, env });
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('not pending');
  });

  it('--yes answers allow_once but never overrides a hard stop', async () => {
    const yes = await runCli(['run', 'write yes.txt: ok', '--yes'], { cwd: dir, env });
    expect(yes.code).toBe(0);
    expect(readFileSync(join(dir, 'yes.txt'), 'utf8')).toBe('ok');
    const stopped = await runCli(['run', 'run rm -rf /', '--yes'], { cwd: dir, env });
    expect(stopped.code).toBe(1);
    expect(stopped.stderr).toContain('stop reason: permission_denied');
  });

  it('replay re-runs a recorded task offline: same events, nothing run again', async () => {
    writeFileSync(join(dir, 'notes.txt'), 'first version');
    const first = await runCli(['run', 'run echo hello then read notes.txt', '--yes'], { cwd: dir, env });
    expect(first.code).toBe(0);
    const taskId = /task (task_\w+) received/.exec(first.stderr)![1];
    writeFileSync(join(dir, 'notes.txt'), 'changed since');
    const replay = await runCli(['replay', taskId, '--save'], { cwd: dir, env });
    expect(replay.code).toBe(0);
    expect(replay.stdout).toContain('first version');
    expect(replay.stdout).not.toContain('changed since');
    const replayedId = /task (task_\w+) received/.exec(replay.stderr)![1];
    expect(replayView(await streamOf(env.RUNLEDGER_DB, replayedId))).toEqual(
      replayView(await streamOf(env.RUNLEDGER_DB, taskId)),
    );
  });

  it('fork continues a recorded task from one of its events as a new task', async () => {
    const first = await runCli(['run', 'run echo forked', '--yes'], { cwd: dir, env });
    const taskId = /task (task_\w+) received/.exec(first.stderr)![1];
    const res = await runCli(['fork', taskId, '4'], { cwd: dir, env });
    expect(res.code).toBe(0);
    expect(res.stderr).toContain('stop reason: completed');
    expect(res.stdout).toContain('forked');
    expect((await runCli(['fork', taskId, 'x'], { cwd: dir, env })).code).toBe(2);
  });

  it('resume <task_id> follows every task it resumed to its end: none is cut off in a tool call at exit', async () => {
    const [quick, slow] = await receivedOnly(env.RUNLEDGER_DB, [
      'run echo hello',
      'run sleep 1 && echo slept',
    ]);
    const res = await runCli(['resume', quick, '--yes'], { cwd: dir, env });
    expect(stderrProblems(res.stderr)).toEqual([]);
    expect(res.stderr).toContain(`resuming 2 unfinished task(s)`);
    expect(res.code).toBe(0);
    const slowLog = await streamOf(env.RUNLEDGER_DB, slow);
    const types = slowLog.map((e) => e.type);
    expect(types.filter((t) => t === 'TOOL_CALLED')).toHaveLength(1);
    expect(types).toContain('TOOL_COMPLETED');
    expect(types[types.length - 1]).toBe('TASK_COMPLETED');
    expect(res.stdout).toContain('slept');
  });

  it('resume --model continues with that model; an unknown task is refused before anything runs', async () => {
    const [lost, other] = await receivedOnly(env.RUNLEDGER_DB, ['answer from the script', 'hello']);
    const script = join(dir, 'script.json');
    writeFileSync(
      script,
      JSON.stringify({ orchestrator: ['{"type":"respond","content":"scripted answer"}'] }),
    );
    const unknown = await runCli(['resume', 'task_nope'], { cwd: dir, env });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('task task_nope not found');
    expect((await streamOf(env.RUNLEDGER_DB, other)).map((e) => e.type)).toEqual(['TASK_RECEIVED']);

    const res = await runCli(['resume', lost, '--model', `scripted:${script}`], { cwd: dir, env });
    expect(res.code).toBe(0);
    expect(res.stdout).toContain('scripted answer');
  });

  it('bad options are clear errors with exit 2, never a stack trace', async () => {
    for (const argv of [
      ['run', 'x', '--model', 'gpt-4'],
      ['resume', '--budget', 'max_rounds=1'],
      ['replay', 't', '--yes'],
      ['run', 'x', '--budget', 'nope=1'],
      ['run', 'x', '--accept', '{"id":"a","kind":"nope"}'],
    ]) {
      const res = await runCli(argv, { cwd: dir, env });
      expect({ argv, code: res.code }).toEqual({ argv, code: 2 });
      // one line, no stack trace
      expect(res.stderr).toMatch(/^runledger: [^\n]+\n$/);
      expect(res.stdout).toBe('');
    }
  });

  it("run --help prints only run's options on stdout, exit 0; no command prints the list of commands", async () => {
    const help = await runCli(['run', '--help'], { cwd: dir, env });
    expect(help.code).toBe(0);
    expect(help.stderr).toBe('');
    expect(help.stdout).toMatch(/^Usage: runledger run \[options\] <input>/);
    for (const flag of ['--model', '--yes', '--json', '--budget', '--accept', '--session'])
      expect(help.stdout).toContain(flag);
    expect(help.stdout).not.toContain('--force');
    expect(help.stdout).not.toMatch(/^ {2}(resume|replay|rebuild) /m);

    const all = await runCli([], { cwd: dir, env });
    expect(all.code).toBe(0);
    for (const command of ['run', 'resume', 'resolve', 'replay', 'fork', 'cancel', 'rebuild', 'serve'])
      expect(all.stdout).toMatch(new RegExp(`^  ${command} `, 'm'));
    expect(existsSync(env.RUNLEDGER_DB)).toBe(false);
  });

  it('an unknown command is one line with a suggestion, exit 2', async () => {
    const res = await runCli(['rn', 'run echo hi'], { cwd: dir, env });
    expect(res.code).toBe(2);
    expect(res.stderr).toBe("runledger: unknown command 'rn' (did you mean run?); see runledger --help\n");
    expect(res.stdout).toBe('');
    const option = await runCli(['run', 'x', '--yse'], { cwd: dir, env });
    expect(option.code).toBe(2);
    expect(option.stderr).toBe(
      "runledger: unknown option '--yse' (did you mean --yes?); see runledger run --help\n",
    );
  });

  it('run "..." --yes > file leaves the answer, and only the answer, in the file', async () => {
    const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
    const res = spawnSync(
      'sh',
      ['-c', `${quote(process.execPath)} ${quote(CLI)} run 'run echo hi' --yes > out.txt`],
      {
        cwd: dir,
        env: { ...process.env, ...CLI_ENV, ...env },
        encoding: 'utf8',
      },
    );
    expect(res.status).toBe(0);
    const completed = (await readTask(env.RUNLEDGER_DB)).find((e) => e.type === 'TASK_COMPLETED');
    const result = completed?.type === 'TASK_COMPLETED' ? completed.payload.result : null;
    expect(result).toContain('hi');
    expect(readFileSync(join(dir, 'out.txt'), 'utf8')).toBe(`${result}\n`);
    // the progress went to the terminal's other stream
    expect(res.stderr).toContain('stop reason: completed');
  });

  it('piped output has no colour codes, on stdout or stderr, even for a failure', async () => {
    for (const argv of [['run', 'run echo plain', '--yes'], ['run', 'run rm -rf /', '--yes'], ['rn']]) {
      const res = await runCli(argv, { cwd: dir, env });
      expect(res.stderr.length).toBeGreaterThan(0);
      expect({ argv, escapes: (res.stdout + res.stderr).includes('\x1b[') }).toEqual({
        argv,
        escapes: false,
      });
    }
  });

  it('resolve --json prints the events and the summary as JSON lines', async () => {
    const waiting = await runCli(['run', 'write j.txt: json'], { cwd: dir, env });
    const how = /runledger resolve (\S+) (\S+) /.exec(waiting.stderr)!;
    const res = await runCli(['resolve', how[1], how[2], 'allow_once', '--json'], { cwd: dir, env });
    expect(res.code).toBe(0);
    const lines = res.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { summary?: { stop_reason: string } });
    expect(lines[lines.length - 1].summary?.stop_reason).toBe('completed');
  });

  it('replay says whether it matched the recording; a log it cannot reproduce is a divergence, exit 1', async () => {
    const first = await runCli(['run', 'run echo hello', '--yes'], { cwd: dir, env });
    const taskId = /task (task_\w+) received/.exec(first.stderr)![1];
    const same = await runCli(['replay', taskId], { cwd: dir, env });
    expect(same.code).toBe(0);
    expect(same.stdout).toMatch(
      new RegExp(`replay matches the recording of ${taskId} \\(\\d+ events compared\\)`),
    );

    // the same task as a process left it when killed while the tool ran: an intent and no outcome
    const recorded = await streamOf(env.RUNLEDGER_DB, taskId);
    const cut = recorded.slice(
      0,
      recorded.findIndex((e) => e.type === 'TOOL_COMPLETED'),
    );
    const storage = await createSqliteStorage({ path: env.RUNLEDGER_DB });
    try {
      await storage.eventStore.append(
        'task_cut',
        cut.map((e) => ({ type: e.type, payload: e.payload, session_id: e.session_id }) as never),
        { expected: 'no_stream' },
      );
    } finally {
      await storage.close();
    }
    const diverged = await runCli(['replay', 'task_cut', '--json'], { cwd: dir, env });
    expect(diverged.code).toBe(1);
    const last = JSON.parse(diverged.stdout.trim().split('\n').pop()!) as {
      replay: { matches: boolean; diverged_at: number; detail: string };
    };
    expect(last.replay).toMatchObject({ matches: false, diverged_at: expect.any(Number) });
    expect(last.replay.detail).toMatch(/^event \d+: recorded nothing, replayed TOOL_FAILED$/);
  });

  it('rebuild recomputes the task states from the log and names the rows that had drifted', async () => {
    const first = await runCli(['run', 'run echo rebuilt', '--yes'], { cwd: dir, env });
    const taskId = /task (task_\w+) received/.exec(first.stderr)![1];
    const clean = await runCli(['rebuild', '--json'], { cwd: dir, env });
    expect(clean.code).toBe(0);
    const report = JSON.parse(clean.stdout.trim()) as {
      rebuild: { tasks: { tasks: number; changed: string[] }; memory_events_applied: number };
    };
    expect(report.rebuild.tasks).toMatchObject({ tasks: 1, changed: [] });
    expect(report.rebuild.memory_events_applied).toBeGreaterThan(0);

    const handle = openSqlite({ path: env.RUNLEDGER_DB });
    handle.raw.prepare("UPDATE tasks SET status = 'failed', result = NULL").run();
    await handle.close();
    const fixed = await runCli(['rebuild'], { cwd: dir, env });
    // drift is named and fails the command
    expect(fixed.code).toBe(1);
    expect(fixed.stdout).toContain(`tasks: 1 rebuilt from `);
    expect(fixed.stdout).toContain(`1 differed from the log: ${taskId}`);
    const check = openSqlite({ path: env.RUNLEDGER_DB });
    try {
      expect(check.raw.prepare('SELECT status, result FROM tasks').get()).toEqual({
        status: 'completed',
        result: expect.stringContaining('rebuilt'),
      });
    } finally {
      await check.close();
    }
  });

  it('a run saves checkpoints; rebuild checks each against a full fold, names a corrupted one and exits 1 until it is rewritten', async () => {
    const first = await runCli(['run', 'run echo hello then read missing.txt', '--yes'], { cwd: dir, env });
    expect(first.code).toBe(1);
    const events = await readTask(env.RUNLEDGER_DB);
    const saved = events.filter((e) => e.type === 'CHECKPOINT_SAVED');
    expect(saved.length).toBeGreaterThan(0);
    const handle = openSqlite({ path: env.RUNLEDGER_DB });
    const rows = handle.raw
      .prepare('SELECT checkpoint_id FROM checkpoints ORDER BY event_sequence')
      .all() as Array<{
      checkpoint_id: string;
    }>;
    expect(rows.map((r) => r.checkpoint_id)).toEqual(
      saved.map((e) => (e.type === 'CHECKPOINT_SAVED' ? e.payload.checkpoint_id : '')),
    );
    const clean = await runCli(['rebuild'], { cwd: dir, env });
    expect(clean.code).toBe(0);
    expect(clean.stdout).toContain(`checkpoints: ${rows.length} checked against a full fold; 0 differed`);

    const corrupted = rows[0].checkpoint_id;
    handle.raw
      .prepare("UPDATE checkpoints SET state = json_set(state, '$.state.rounds', 7) WHERE checkpoint_id = ?")
      .run(corrupted);
    await handle.close();
    const drift = await runCli(['rebuild', '--json'], { cwd: dir, env });
    expect(drift.code).toBe(1);
    const report = JSON.parse(drift.stdout.trim()) as { rebuild: { checkpoints: { changed: string[] } } };
    expect(report.rebuild.checkpoints).toEqual({ checkpoints: rows.length, changed: [corrupted] });
    expect((await runCli(['rebuild'], { cwd: dir, env })).code).toBe(0);
  });

  it('with RUNLEDGER_CHECKPOINTS=off a run saves no checkpoint', async () => {
    const res = await runCli(['run', 'run echo hello then read missing.txt', '--yes'], {
      cwd: dir,
      env: { ...env, RUNLEDGER_CHECKPOINTS: 'off' },
    });
    expect(res.code).toBe(1);
    const events = await readTask(env.RUNLEDGER_DB);
    expect(events.length).toBeGreaterThan(5);
    expect(events.filter((e) => e.type === 'CHECKPOINT_SAVED')).toEqual([]);
    const handle = openSqlite({ path: env.RUNLEDGER_DB });
    try {
      expect(handle.raw.prepare('SELECT count(*) AS n FROM checkpoints').get()).toEqual({ n: 0 });
    } finally {
      await handle.close();
    }
  });

  it("the event log is out of the tools' reach even with --yes: writing or deleting the storage is a hard stop", async () => {
    const first = await runCli(['run', 'run echo before', '--yes'], { cwd: dir, env });
    expect(first.code).toBe(0);
    for (const input of [
      'write data/runledger.db: oops',
      'run rm -rf data',
      'run echo x > data/runledger.db-wal',
    ]) {
      const res = await runCli(['run', input, '--yes'], { cwd: dir, env });
      expect({ input, code: res.code }).toEqual({ input, code: 1 });
      expect(res.stderr).toContain('stop reason: permission_denied');
    }
    const after = await runCli(['run', 'run echo after', '--yes'], { cwd: dir, env });
    expect(stderrProblems(after.stderr)).toEqual([]);
    expect(after.code).toBe(0);
    const handle = openSqlite({ path: env.RUNLEDGER_DB });
    try {
      expect(
        handle.raw.prepare("SELECT count(*) AS n FROM events WHERE type = 'TASK_RECEIVED'").get(),
      ).toEqual({ n: 5 });
    } finally {
      await handle.close();
    }
  });

  it('cancel ends a task left waiting for a person: stop reason cancelled with its usage; again is a no-op', async () => {
    const waiting = await runCli(['run', 'write c.txt: never'], { cwd: dir, env });
    expect(waiting.code).toBe(3);
    const taskId = /task (task_\w+) is awaiting_permission/.exec(waiting.stderr)![1];
    const res = await runCli(['cancel', taskId], { cwd: dir, env });
    expect(stderrProblems(res.stderr)).toEqual([]);
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('stop reason: cancelled (cancelled by request)');
    expect(res.stderr).toMatch(/rounds 1 · tool calls 0 · model calls 1 · tokens \d+/);
    expect(existsSync(join(dir, 'c.txt'))).toBe(false);
    expect((await runCli(['cancel', taskId], { cwd: dir, env })).stderr).toContain('stop reason: cancelled');
    const done = await runCli(['run', 'run echo done', '--yes'], { cwd: dir, env });
    const doneId = /task (task_\w+) received/.exec(done.stderr)![1];
    const late = await runCli(['cancel', doneId], { cwd: dir, env });
    expect(late.code).toBe(1);
    expect(stderrProblems(late.stderr)).toEqual([`runledger: task ${doneId} already ended (completed)`]);
  });

  it('a reader that goes away (--json | head -1) does not kill the task half-way: it runs to its end', async () => {
    const { child, done } = spawnCli(['run', 'run sleep 1 && echo finished', '--json', '--yes'], {
      cwd: dir,
      env,
    });
    child.stdout!.once('data', () => child.stdout!.destroy());
    const res = await done;
    expect(res.stderr).not.toContain('EPIPE');
    expect(res.code).toBe(0);
    const events = await readTask(env.RUNLEDGER_DB);
    expect(events.map((e) => e.type)).toContain('TOOL_COMPLETED');
    expect(events[events.length - 1].type).toBe('TASK_COMPLETED');
  });

  // `script` gives the CLI a real pseudo-terminal, so it asks instead of exiting.
  const hasScript = spawnSync('script', ['--version']).status === 0;
  (hasScript ? it : it.skip)('on a terminal the progress is coloured; NO_COLOR turns it off', async () => {
    const onTerminal = (extraEnv: Record<string, string>) =>
      new Promise<string>((resolve) => {
        const child = spawn(
          'script',
          ['-qfec', `${process.execPath} ${CLI} run 'run echo tty' --yes`, '/dev/null'],
          {
            cwd: dir,
            env: {
              ...process.env,
              ...env,
              ...CLI_ENV,
              TERM: 'xterm',
              ...extraEnv,
            },
            stdio: ['pipe', 'pipe', 'pipe'],
          },
        );
        let out = '';
        child.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
        child.on('close', () => resolve(out));
      });
    const coloured = await onTerminal({});
    expect(coloured).toContain('stop reason: completed');
    expect(coloured).toContain('\x1b[32m■ completed\x1b[39m');
    const plain = await onTerminal({ NO_COLOR: '1' });
    expect(plain).toContain('stop reason: completed');
    expect(plain).not.toContain('\x1b[');
  });

  (hasScript ? it : it.skip)('a terminal user is asked; "n" denies the call, "y" allows it', async () => {
    const answer = (input: string, reply: string) =>
      new Promise<{ code: number | null; out: string }>((resolve) => {
        const child = spawn('script', ['-qfec', `${process.execPath} ${CLI} run '${input}'`, '/dev/null'], {
          cwd: dir,
          env: { ...process.env, ...env, ...CLI_ENV },
          stdio: ['pipe', 'pipe', 'pipe'],
        });
        let out = '';
        let asked = false;
        child.stdout.on('data', (c: Buffer) => {
          out += c.toString('utf8');
          if (!asked && out.includes('[y]es once')) {
            asked = true;
            child.stdin.write(`${reply}\r`);
          }
        });
        child.on('close', (code) => resolve({ code, out }));
      });
    const denied = await answer('write no.txt: nope', 'n');
    expect(denied.out).toContain('permission deny for file_write');
    expect(denied.out).toContain('stop reason: permission_denied');
    expect(denied.code).toBe(1);
    expect(existsSync(join(dir, 'no.txt'))).toBe(false);
    const allowed = await answer('write yes.txt: fine', 'y');
    expect(allowed.code).toBe(0);
    expect(readFileSync(join(dir, 'yes.txt'), 'utf8')).toBe('fine');
  });
});
