import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InMemoryEventStore } from '@runledger/event-store';
import { ScriptedBackend } from '@runledger/runtime';
import { AllowAllPolicy, startTestRuntime, testToolRegistry } from '@runledger/testing';
import { serverDiscipline } from './workload-support';

/** The fixed workload: each task's input and the orchestrator's answers, in order. */
const TASKS: Array<{ input: string; orchestrator: string[] }> = [
  {
    input: 'when does the release ship? the notes are in notes.txt',
    orchestrator: [
      JSON.stringify({ type: 'tool', tool: 'file_read', args: { path: 'notes.txt' } }),
      JSON.stringify({ type: 'respond', content: 'The release ships on Friday.' }),
    ],
  },
  {
    input: 'count the lines of notes.txt and say who owns the release',
    orchestrator: [
      JSON.stringify({
        type: 'plan',
        steps: [
          {
            id: 'lines',
            kind: 'tool',
            tool: 'shell_exec',
            args: { command: 'wc -l notes.txt' },
            description: 'count',
            depends_on: [],
          },
          {
            id: 'owner',
            kind: 'tool',
            tool: 'shell_exec',
            args: { command: 'grep owner notes.txt' },
            description: 'owner',
            depends_on: [],
          },
        ],
      }),
      JSON.stringify({ type: 'respond', content: 'Three lines; the release is owned by Dana.' }),
    ],
  },
  {
    input: 'append a reminder to todo.txt, then read it back',
    orchestrator: [
      JSON.stringify({
        type: 'tool',
        tool: 'append_line',
        args: { path: 'todo.txt', line: 'ship v1.2 on Friday' },
      }),
      JSON.stringify({ type: 'tool', tool: 'file_read', args: { path: 'todo.txt' } }),
      JSON.stringify({ type: 'respond', content: 'todo.txt now says: ship v1.2 on Friday' }),
    ],
  },
  {
    input: 'say hello',
    orchestrator: [JSON.stringify({ type: 'respond', content: 'Hello.' })],
  },
  {
    input: 'echo the word ready, three times in three rounds',
    orchestrator: [
      ...[1, 2, 3].map((n) => JSON.stringify({ type: 'tool', tool: 'echo', args: { text: `ready ${n}` } })),
      JSON.stringify({ type: 'respond', content: 'ready ready ready' }),
    ],
  },
];

export interface TokensPerTask {
  tasks: number;
  completed: number;
  /** total tokens (prompt + completion, as the usage the tasks recorded) over the completed tasks, per task */
  tokens_per_completed_task: number;
}

/**
 * Five fixed tasks (a file read, a two-step plan, an append then read, a plain answer, three echo
 * rounds), each answered by a scripted orchestrator under the server's default run discipline. The
 * scripted model gives no usage, so each call's tokens are estimated from the prompt the runtime
 * built and the answer: what this measures is how much prompt the runtime spends per task.
 */
export async function measureTokensPerTask(): Promise<TokensPerTask> {
  const dir = mkdtempSync(join(tmpdir(), 'rl-gates-tokens-'));
  writeFileSync(join(dir, 'notes.txt'), 'release: v1.2\nships: Friday\nowner: Dana\n');
  let completed = 0;
  let tokens = 0;
  try {
    for (const task of TASKS) {
      const rt = await startTestRuntime({
        store: new InMemoryEventStore(),
        tools: testToolRegistry(dir),
        permissions: new AllowAllPolicy(),
        model: new ScriptedBackend({ orchestrator: task.orchestrator }),
        discipline: serverDiscipline(),
      });
      try {
        const { task_id } = await rt.runtime.submit({ input: task.input }, { source: 'api' });
        const p = await rt.runtime.settled(task_id);
        if (p.final?.stop_reason !== 'completed') continue;
        completed += 1;
        tokens += p.usage.total_tokens;
      } finally {
        await rt.close();
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return {
    tasks: TASKS.length,
    completed,
    tokens_per_completed_task: completed === 0 ? Number.POSITIVE_INFINITY : tokens / completed,
  };
}
