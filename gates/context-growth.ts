import { InMemoryEventStore } from '@runledger/event-store';
import { ScriptedBackend } from '@runledger/runtime';
import { AllowAllPolicy, InMemoryToolRegistry, manifestOf, startTestRuntime } from '@runledger/testing';
import { promptCharsPerRound, serverDiscipline, slope } from './workload-support';

export const CONTEXT_GROWTH_ROUNDS = 220;

export interface ContextGrowth {
  rounds: number;
  /** prompt chars per round over the second half of the task (the context window is full by then) */
  steady_slope: number;
  /** prompt chars per round over the first half */
  early_slope: number;
  max_prompt_chars: number;
  stop_reason: string | null;
}

/**
 * A scripted orchestrator calling a lookup tool once per round for 220 rounds (new arguments each
 * round, ~300 characters of output), then answering, under the server's default run discipline
 * (8192-token window, trimming and compaction). What each round's orchestrator prompt weighs, from
 * its MODEL_CALLED events: once the window is full it must stop growing.
 */
export async function measureContextGrowth(): Promise<ContextGrowth> {
  const store = new InMemoryEventStore();
  const tools = new InMemoryToolRegistry().add(
    manifestOf('lookup', {
      description: 'Looks a record up by its number.',
      args_schema: {
        type: 'object',
        properties: { n: { type: 'integer' } },
        required: ['n'],
        additionalProperties: false,
      },
    }),
    async (args) => ({
      record: Number(args.n),
      text: `record ${String(args.n)} `.padEnd(300, 'lorem ipsum '),
    }),
  );
  const script = [
    ...Array.from({ length: CONTEXT_GROWTH_ROUNDS }, (_, n) =>
      JSON.stringify({ type: 'tool', tool: 'lookup', args: { n } }),
    ),
    JSON.stringify({ type: 'respond', content: 'looked every record up' }),
  ];
  const calls = CONTEXT_GROWTH_ROUNDS * 4;
  const rt = await startTestRuntime({
    store,
    tools,
    permissions: new AllowAllPolicy(),
    model: new ScriptedBackend({ orchestrator: script }),
    discipline: serverDiscipline({
      max_rounds: CONTEXT_GROWTH_ROUNDS + 2,
      max_tool_calls: calls,
      max_model_calls: calls,
      max_failures: calls,
      max_tokens: Number.MAX_SAFE_INTEGER,
      timeout_ms: 3_600_000,
    }),
    maxRounds: CONTEXT_GROWTH_ROUNDS + 2,
  });
  try {
    const { task_id } = await rt.runtime.submit(
      { input: `look up records 0 to ${CONTEXT_GROWTH_ROUNDS - 1}, one per round` },
      { source: 'api' },
    );
    const progress = await rt.runtime.settled(task_id);
    const points = promptCharsPerRound(await store.readWholeStream(task_id));
    const half = Math.floor(points.length / 2);
    return {
      rounds: points.length,
      steady_slope: slope(points.slice(half)),
      early_slope: slope(points.slice(0, half)),
      max_prompt_chars: Math.max(...points.map(([, y]) => y)),
      stop_reason: progress.final?.stop_reason ?? null,
    };
  } finally {
    await rt.close();
  }
}
