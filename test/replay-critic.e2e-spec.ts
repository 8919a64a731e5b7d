import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { RuntimeEvent } from '@runledger/contracts';
import { SqliteEventStore, openSqlite } from '@runledger/event-store';
import { replayView } from '@runledger/runtime';
import {
  FakeOpenAiServer,
  runCli,
  startFakeOpenAiServer,
  stderrProblems,
  useScriptedCliFolder,
} from '@runledger/testing';

/**
 * `runledger replay` of a run scored by a model critic (a scripted model with a
 * `critic` list: RUNLEDGER_CRITIC=auto picks the model critic), as real child
 * processes. The replay reproduces the critic's calls, verdicts and usage from
 * the log: no model is asked (the script is gone) and memory is not written.
 */

const tool = (name: string, args: Record<string, unknown>) =>
  JSON.stringify({ type: 'tool', tool: name, args });
const score = (weight: number, notes: string) =>
  JSON.stringify({ correctness: 0.9, usefulness: 0.8, safety: 1, memory_store: true, weight, notes });

interface MemoryRow {
  id: string;
  weight: number;
  written_by: string;
}

async function readDb(
  dbPath: string,
  taskIds: string[],
): Promise<{ streams: RuntimeEvent[][]; memory: MemoryRow[]; memoryWrites: number }> {
  const handle = openSqlite({ path: dbPath });
  try {
    const store = new SqliteEventStore(handle);
    const streams = await Promise.all(taskIds.map((id) => store.readWholeStream(id)));
    const memory = (await handle.db
      .selectFrom('memory_entries' as never)
      .select(['id', 'weight', 'written_by'] as never[])
      .orderBy('id' as never)
      .execute()) as unknown as MemoryRow[];
    const memoryWrites = (await store.readAll({ types: ['MEMORY_WRITTEN'] })).length;
    return { streams, memory, memoryWrites };
  } finally {
    await handle.close();
  }
}

jest.setTimeout(60_000);

describe('runledger replay of a run with a model critic (real child processes)', () => {
  const cli = useScriptedCliFolder('rl-replay-critic-', {
    RUNLEDGER_MEMORY: 'on',
    RUNLEDGER_EMBEDDER: 'hash',
  });

  beforeEach(() => {
    writeFileSync(join(cli.dir, 'notes.txt'), 'the build uses swc and jest');
    writeFileSync(join(cli.dir, 'todo.txt'), 'ship the replay fix');
    writeFileSync(
      cli.script,
      JSON.stringify({
        orchestrator: [
          tool('file_read', { path: 'notes.txt' }),
          tool('file_read', { path: 'missing.txt' }),
          tool('file_read', { path: 'todo.txt' }),
          tool('file_read', { path: 'notes.txt' }),
          '{"type":"respond","content":"read the notes"}',
        ],
        critic: [
          { content: score(0.9, 'useful notes'), usage: { prompt_tokens: 120, completion_tokens: 30 } },
          // the failed read is retried (file_read is idempotent): two outcomes, two critic calls
          'the read failed, nothing to score',
          { error: 'provider_error', message: 'critic upstream 502' },
          { content: score(0.6, 'a todo'), usage: { prompt_tokens: 100, completion_tokens: 25 } },
          { content: score(0.95, 'read again'), usage: { prompt_tokens: 110, completion_tokens: 20 } },
        ],
      }),
    );
  });

  it.each([
    ['auto (a scripted critic list makes it the model critic)', 'auto'],
    ['model', 'model'],
  ])(
    'RUNLEDGER_CRITIC=%s: replay matches the recording, exit 0, no model asked, memory untouched',
    async (_name, critic) => {
      cli.env.RUNLEDGER_CRITIC = critic;
      const first = await runCli(['run', 'read my notes', '--yes'], { cwd: cli.dir, env: cli.env });
      expect(stderrProblems(first.stderr)).toEqual([]);
      expect(first.code).toBe(0);
      const taskId = /task (task_\w+) received/.exec(first.stderr)![1];

      const before = await readDb(cli.env.RUNLEDGER_DB, [taskId]);
      const recorded = before.streams[0];
      const criticCalls = recorded.filter((e) => e.type === 'MODEL_CALLED' && e.payload.role === 'critic');
      expect(criticCalls).toHaveLength(5);
      expect(
        recorded.flatMap((e) =>
          e.type === 'CRITIC_RESULT' ? [[e.payload.critic, e.payload.error !== null]] : [],
        ),
      ).toEqual([
        ['model', false],
        ['model', true],
        ['model', true],
        ['model', false],
        ['model', false],
      ]);
      // the recording wrote memory: inserts, and a reinforce when notes.txt was read again
      expect(before.memoryWrites).toBeGreaterThan(0);
      expect(recorded.flatMap((e) => (e.type === 'MEMORY_WRITTEN' ? [e.payload.op] : []))).toContain(
        'reinforce',
      );

      // Offline: the script is gone, so any model call would fail (and diverge).
      rmSync(cli.script);
      writeFileSync(cli.script, JSON.stringify({ orchestrator: [], critic: [] }));
      const replay = await runCli(['replay', taskId, '--json', '--save'], { cwd: cli.dir, env: cli.env });
      expect(stderrProblems(replay.stderr)).toEqual([]);
      const last = JSON.parse(replay.stdout.trim().split('\n').pop()!) as {
        replay: { task_id: string; matches: boolean; compared: number; diverged_at: number | null };
      };
      expect(last.replay).toMatchObject({ matches: true, diverged_at: null });
      expect(replay.code).toBe(0);

      const after = await readDb(cli.env.RUNLEDGER_DB, [taskId, last.replay.task_id]);
      const [original, replayed] = after.streams;
      expect(replayView(replayed)).toEqual(replayView(original));
      // the critic's part is compared, not left out
      expect(replayView(replayed).filter((e) => e.type === 'CRITIC_RESULT')).toHaveLength(5);
      expect(replayed.filter((e) => e.type === 'MODEL_CALLED' && e.payload.role === 'critic')).toHaveLength(
        5,
      );
      const finalOf = (events: RuntimeEvent[]) => {
        const f = events[events.length - 1];
        return f.type === 'TASK_COMPLETED' ? f.payload.usage : null;
      };
      expect(finalOf(replayed)).toEqual(finalOf(original));
      // no memory write: not in the replay's stream, not in the table
      expect(replayed.some((e) => e.type === 'MEMORY_WRITTEN')).toBe(false);
      expect(after.memoryWrites).toBe(before.memoryWrites);
      // the table (synced by the replay's process) holds what the recording wrote, at the weights it wrote
      const recordedWeights = new Map<string, number>();
      for (const e of original)
        if (e.type === 'MEMORY_WRITTEN') recordedWeights.set(e.payload.entry_id, e.payload.weight);
      expect(new Map(after.memory.map((r) => [r.id, r.weight]))).toEqual(recordedWeights);
      const originalIds = new Set(original.map((e) => e.event_id));
      expect(after.memory.filter((r) => !originalIds.has(r.written_by))).toEqual([]);
    },
  );

  it('a heuristic critic and no critic replay too', async () => {
    for (const critic of ['heuristic', 'off']) {
      cli.env.RUNLEDGER_CRITIC = critic;
      const first = await runCli(['run', 'read my notes', '--yes'], { cwd: cli.dir, env: cli.env });
      expect(first.code).toBe(0);
      const taskId = /task (task_\w+) received/.exec(first.stderr)![1];
      const replay = await runCli(['replay', taskId], { cwd: cli.dir, env: cli.env });
      expect({ critic, code: replay.code }).toEqual({ critic, code: 0 });
      expect(replay.stdout).toMatch(new RegExp(`replay matches the recording of ${taskId}`));
      const { streams } = await readDb(cli.env.RUNLEDGER_DB, [taskId]);
      expect(streams[0].filter((e) => e.type === 'CRITIC_RESULT')).toHaveLength(critic === 'off' ? 0 : 5);
    }
  });

  it('RUNLEDGER_MODEL=openai with the default critic (auto: the model critic): replay offline, server closed, exit 0', async () => {
    const server: FakeOpenAiServer = await startFakeOpenAiServer();
    Object.assign(cli.env, {
      RUNLEDGER_MODEL: 'openai',
      RUNLEDGER_MODEL_PROTOCOL: 'json',
      OPENAI_BASE_URL: server.baseURL,
      OPENAI_API_KEY: 'test-key',
      RUNLEDGER_MODEL_ORCHESTRATOR: 'model-a',
    });
    server.enqueue(
      {
        content: tool('file_read', { path: 'notes.txt' }),
        usage: { prompt_tokens: 300, completion_tokens: 20 },
      },
      { content: score(0.8, 'notes'), usage: { prompt_tokens: 150, completion_tokens: 40 } },
      {
        content: tool('file_read', { path: 'todo.txt' }),
        usage: { prompt_tokens: 320, completion_tokens: 20 },
      },
      { status: 500, message: 'critic upstream down' },
      {
        content: '{"type":"respond","content":"read both"}',
        usage: { prompt_tokens: 340, completion_tokens: 10 },
      },
    );
    let taskId: string;
    try {
      const first = await runCli(['run', 'read my notes', '--yes'], { cwd: cli.dir, env: cli.env });
      expect(stderrProblems(first.stderr)).toEqual([]);
      expect(first.code).toBe(0);
      taskId = /task (task_\w+) received/.exec(first.stderr)![1];
    } finally {
      await server.close();
    }
    const { streams } = await readDb(cli.env.RUNLEDGER_DB, [taskId]);
    expect(
      streams[0].flatMap((e) =>
        e.type === 'MODEL_CALLED' && e.payload.role === 'critic' ? [e.payload.model] : [],
      ),
    ).toEqual(['model-a', 'model-a']);
    expect(streams[0].flatMap((e) => (e.type === 'CRITIC_RESULT' ? [e.payload.error === null] : []))).toEqual(
      [true, false],
    );

    const replay = await runCli(['replay', taskId], { cwd: cli.dir, env: cli.env });
    expect(stderrProblems(replay.stderr)).toEqual([]);
    expect(replay.stdout).toMatch(
      new RegExp(`replay matches the recording of ${taskId} \\(\\d+ events compared\\)`),
    );
    expect(replay.code).toBe(0);
  });
});
