import { InMemoryEventStore } from '@runledger/event-store';
import { OpenAiBackend } from '@runledger/runtime';
import {
  AllowAllPolicy,
  FakeReply,
  InMemoryToolRegistry,
  manifestOf,
  startFakeOpenAiServer,
  startTestRuntime,
} from '@runledger/testing';
import { messagesOf, serverDiscipline, taskOf } from './workload-support';

/** every task's time budget */
export const HANG_TIMEOUT_MS = 1500;
/** how long past its timeout a task may take to record its stop */
export const HANG_GRACE_MS = 2000;

const NEVER = 600_000;
const call = (id: string, name: string, args: Record<string, unknown>) => ({
  id,
  name,
  arguments: JSON.stringify(args),
});

/** What the model server does for each task of the workload (by the task's input). */
const BEHAVIOUR: Record<string, (toolResults: number) => FakeReply> = {
  'the model never answers': () => ({ content: 'too late', delay_ms: NEVER }),
  'the model stream stalls after its first piece': () => ({
    content: 'a long answer that never ends',
    stall_ms: NEVER,
  }),
  'the tool never returns, whatever it is told': () => ({ tool_calls: [call('c_stuck', 'stuck', {})] }),
  'the model keeps calling tools, slowly, for ever': (n) => ({
    tool_calls: [call(`c_tick_${n}`, 'tick', { n })],
    delay_ms: 300,
  }),
  'the model answers only after a long think': () => ({ content: 'finally', delay_ms: HANG_TIMEOUT_MS * 3 }),
};

export interface Hangs {
  tasks: number;
  /** tasks with no stop reason HANG_GRACE_MS after their timeout */
  hung: number;
  /** the longest a task took past its timeout to stop (ms) */
  max_overrun_ms: number;
  stop_reasons: string[];
}

/**
 * Five tasks with a 1.5 s time budget, at once, against a model server (real HTTP, native tool
 * calls) that never answers, stalls its stream, answers too late, or keeps calling tools, and a tool
 * that never returns and ignores its abort. Every one must end with a stop reason within 2 s of its
 * timeout.
 */
export async function measureHangs(): Promise<Hangs> {
  const server = await startFakeOpenAiServer({ apiKey: 'gates' });
  server.setRoute((body) => {
    const behaviour = BEHAVIOUR[taskOf(body)];
    return behaviour?.(messagesOf(body).filter((m) => m.role === 'tool').length);
  });
  const tools = new InMemoryToolRegistry()
    .add(
      manifestOf('stuck', { description: 'Never returns.', timeout_ms: NEVER }),
      () => new Promise(() => undefined),
    )
    .add(manifestOf('tick', { description: 'Returns its number.' }), async (args) => args.n);
  const rt = await startTestRuntime({
    store: new InMemoryEventStore(),
    tools,
    permissions: new AllowAllPolicy(),
    model: new OpenAiBackend({
      baseURL: server.baseURL,
      apiKey: 'gates',
      models: { orchestrator: 'gates-model' },
    }),
    discipline: serverDiscipline({ max_rounds: 1000, max_tool_calls: 1000, max_model_calls: 1000 }),
    maxRounds: 1000,
    concurrency: Object.keys(BEHAVIOUR).length,
  });
  try {
    const outcomes = await Promise.all(
      Object.keys(BEHAVIOUR).map(async (input) => {
        const started = Date.now();
        const { task_id } = await rt.runtime.submit(
          { input, budgets: { timeout_ms: HANG_TIMEOUT_MS } },
          { source: 'api' },
        );
        const settled = rt.runtime.settled(task_id).then((p) => ({ p, at: Date.now() }));
        const late = new Promise<null>((resolve) =>
          setTimeout(() => resolve(null), HANG_TIMEOUT_MS + HANG_GRACE_MS).unref(),
        );
        const end = await Promise.race([settled, late]);
        return end?.p.final
          ? { stop: end.p.final.stop_reason, overrun: end.at - started - HANG_TIMEOUT_MS }
          : { stop: null, overrun: HANG_GRACE_MS };
      }),
    );
    return {
      tasks: outcomes.length,
      hung: outcomes.filter((o) => o.stop === null).length,
      max_overrun_ms: Math.max(0, ...outcomes.map((o) => o.overrun)),
      stop_reasons: outcomes.map((o) => o.stop ?? 'none'),
    };
  } finally {
    await rt.close();
    await server.close();
  }
}
