import { writeFileSync } from 'node:fs';
import { RuntimeEvent } from '@runledger/contracts';
import { SqliteEventStore, openSqlite } from '@runledger/event-store';
import { createSqliteStorage } from '@runledger/state-store';
import { runCli, stderrProblems, useScriptedCliFolder } from '@runledger/testing';

/**
 * `runledger replay` never runs live and does not depend on the environment
 * (real child processes): the live log is left as it was unless --save, a task
 * stopped by its time budget replays to the same stop, and a run recorded under
 * other retries and prices replays under those it recorded.
 */

const tool = (name: string, args: Record<string, unknown>) =>
  JSON.stringify({ type: 'tool', tool: name, args });
const respond = (content: string) => JSON.stringify({ type: 'respond', content });

async function readLog(dbPath: string): Promise<RuntimeEvent[]> {
  const handle = openSqlite({ path: dbPath });
  try {
    return await new SqliteEventStore(handle).readAll();
  } finally {
    await handle.close();
  }
}

const tasksOf = (log: RuntimeEvent[]) => log.filter((e) => e.type === 'TASK_RECEIVED').map((e) => e.task_id);
const lastLine = <T>(stdout: string): T => JSON.parse(stdout.trim().split('\n').pop()!) as T;

interface ReplayLine {
  replay: {
    task_id: string;
    matches: boolean;
    saved: boolean;
    diverged_at: number | null;
    detail: string | null;
  };
}

jest.setTimeout(60_000);

describe('runledger replay: isolated from the live log, the environment and the wall clock', () => {
  const cli = useScriptedCliFolder('rl-replay-iso-', { RUNLEDGER_CRITIC: 'off' });

  const recordedTask = (stderr: string) => /task (task_\w+) received/.exec(stderr)![1];

  it('a task stopped by timeout_ms replays to the same stop and writes nothing; --save writes the ended replay', async () => {
    writeFileSync(
      cli.script,
      JSON.stringify({ orchestrator: [{ content: respond('too late'), delay_ms: 5_000 }] }),
    );
    const run = await runCli(['run', 'answer slowly', '--budget', 'timeout_ms=300'], {
      cwd: cli.dir,
      env: cli.env,
    });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('stop reason: timeout');
    const taskId = recordedTask(run.stderr);
    const before = await readLog(cli.env.RUNLEDGER_DB);

    const replay = await runCli(['replay', taskId], { cwd: cli.dir, env: cli.env });
    expect(stderrProblems(replay.stderr)).toEqual([]);
    expect(replay.stderr).toContain('stop reason: timeout');
    expect(replay.stdout).toMatch(new RegExp(`replay matches the recording of ${taskId}`));
    // the recording ended by timeout, so does its replay: exit 1 (0 is for a completed task that matched)
    expect(replay.code).toBe(1);
    const after = await readLog(cli.env.RUNLEDGER_DB);
    expect(after).toEqual(before);
    expect(tasksOf(after)).toEqual([taskId]);

    const saved = await runCli(['replay', taskId, '--save', '--json'], { cwd: cli.dir, env: cli.env });
    const verdict = lastLine<ReplayLine>(saved.stdout).replay;
    expect(verdict).toMatchObject({ matches: true, saved: true });
    const log = await readLog(cli.env.RUNLEDGER_DB);
    expect(tasksOf(log)).toEqual([taskId, verdict.task_id]);
    const replayed = log.filter((e) => e.task_id === verdict.task_id);
    expect(replayed[replayed.length - 1]).toMatchObject({
      type: 'TASK_FAILED',
      payload: { stop_reason: 'timeout' },
    });

    // an ended task: a restart has nothing to resume, so nothing runs with the live model
    const resume = await runCli(['resume', '--json'], { cwd: cli.dir, env: cli.env });
    expect(resume.code).toBe(0);
    expect(await readLog(cli.env.RUNLEDGER_DB)).toEqual(log);
  });

  it('a run recorded with RUNLEDGER_MODEL_RETRIES=0 and one price table replays the same with 3 retries and another', async () => {
    writeFileSync(
      cli.script,
      JSON.stringify({
        orchestrator: [
          { content: tool('echo', { text: 'hi' }), usage: { prompt_tokens: 1000, completion_tokens: 500 } },
          { error: 'provider_error', message: 'upstream 502' },
          { content: respond('done'), usage: { prompt_tokens: 1000, completion_tokens: 100 } },
        ],
      }),
    );
    const price = (input: number, output: number) =>
      JSON.stringify({ scripted: { input_per_mtok: input, output_per_mtok: output } });
    const run = await runCli(['run', 'echo hi', '--yes', '--json'], {
      cwd: cli.dir,
      env: { ...cli.env, RUNLEDGER_MODEL_RETRIES: '0', RUNLEDGER_PRICE_TABLE: price(3, 15) },
    });
    const summary = lastLine<{ summary: { task_id: string; usage: { cost_usd: number } } }>(
      run.stdout,
    ).summary;
    expect(summary.usage.cost_usd).toBeGreaterThan(0);
    const before = await readLog(cli.env.RUNLEDGER_DB);
    // no retry was made: the failed call went to the fallback orchestrator
    expect(before.some((e) => e.type === 'GUARD_TRIGGERED' && e.payload.guard === 'retry')).toBe(false);

    const replay = await runCli(['replay', summary.task_id, '--json'], {
      cwd: cli.dir,
      env: { ...cli.env, RUNLEDGER_MODEL_RETRIES: '3', RUNLEDGER_PRICE_TABLE: price(30, 150) },
    });
    expect(stderrProblems(replay.stderr)).toEqual([]);
    expect(lastLine<ReplayLine>(replay.stdout).replay).toMatchObject({ matches: true, diverged_at: null });
    const replayedSummary = replay.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { summary?: { usage: { cost_usd: number } } })
      .find((l) => l.summary)!.summary!;
    expect(replayedSummary.usage.cost_usd).toBe(summary.usage.cost_usd);
    expect(await readLog(cli.env.RUNLEDGER_DB)).toEqual(before);
  });

  it('a divergence names the event, the field and both values', async () => {
    writeFileSync(cli.script, JSON.stringify({ orchestrator: [respond('hello')] }));
    const run = await runCli(['run', 'say hello'], { cwd: cli.dir, env: cli.env });
    expect(run.code).toBe(0);
    const recorded = (await readLog(cli.env.RUNLEDGER_DB)).filter(
      (e) => e.task_id === recordedTask(run.stderr),
    );
    // the same log, but its model call recorded under another role
    const storage = await createSqliteStorage({ path: cli.env.RUNLEDGER_DB });
    try {
      await storage.eventStore.append(
        'task_edited',
        recorded.map(
          (e) =>
            ({
              type: e.type,
              payload: e.type === 'MODEL_CALLED' ? { ...e.payload, role: 'coder' } : e.payload,
              session_id: e.session_id,
            }) as never,
        ),
        { expected: 'no_stream' },
      );
    } finally {
      await storage.close();
    }
    const at = recorded.findIndex((e) => e.type === 'MODEL_CALLED') + 1;
    const replay = await runCli(['replay', 'task_edited'], { cwd: cli.dir, env: cli.env });
    expect(replay.code).toBe(1);
    expect(replay.stdout).toContain(
      `replay diverged from the recording of task_edited: event ${at} (MODEL_CALLED) payload.role: recorded 'coder', replayed 'orchestrator'`,
    );
  });
});
