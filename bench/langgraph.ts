/**
 * npm run bench -- langgraph
 * The same 7-step task on Runledger and on LangGraph.js with its SQLite
 * checkpointer (SqliteSaver), in the same run. The task: an orchestrator
 * (a scripted model, no network) plans 7 tool steps, each using the previous
 * step's output; the steps run in order; the orchestrator then responds.
 * Every step runs the same in-memory tool (a SHA-256 chain over its input),
 * declared read-only, as it is: its intent commits with its outcome rather
 * than before it runs (BENCH_TOOL_READ_ONLY=off declares it as a tool with
 * side effects, one commit before each step).
 * With critic and memory on, each tool outcome is scored by the heuristic
 * critic and, when the write policy keeps it, embedded (hashing embedder,
 * 384 dimensions) and stored:
 *   - Runledger: the server's default composition of those parts (critic and
 *     memory hook after every tool outcome, the memory end guard, recall into
 *     the context), checkpoints on, SQLite synchronous=FULL, appends on the
 *     writer thread as the server runs them;
 *   - LangGraph: a StateGraph of plan, 7 step nodes and respond; a step node
 *     runs the tool, then (when on) the same critic, policy and embedder, and
 *     keeps what memory keeps in the graph's state, which SqliteSaver
 *     checkpoints after every node; SqliteSaver as it comes (WAL, the library's
 *     default durability).
 * Printed per concurrency (1, 4, 16 tasks at once; BENCH_TASKS tasks per run)
 * and critic/memory off and on: tasks/s of each, medians of BENCH_RUNS (5)
 * alternating runs, and Runledger's ratio to LangGraph.
 * Then 16 at once again with BENCH_STEADY_TASKS (128) tasks a run, past the start and the drain
 * (left out when BENCH_CONCURRENCY has no 16). Then critic and memory on again at each concurrency,
 * LangGraph keeping memory in a store shared by its tasks and deduplicating and recalling as Runledger
 * does (see LANGGRAPH_STORE; BENCH_LANGGRAPH_STORE=off leaves it out).
 * Env: BENCH_TASKS (32), BENCH_STEADY_TASKS (128; 0: not run), BENCH_RUNS (5), BENCH_CONCURRENCY (1,4,16),
 * BENCH_SYNCHRONOUS (FULL; Runledger's), BENCH_WRITER_THREAD (on | off),
 * BENCH_TOOL_READ_ONLY (on | off), BENCH_MODEL_IN_PROCESS (on | off), BENCH_LANGGRAPH_STORE (on | off).
 */
import { createHash, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Embeddings } from '@langchain/core/embeddings';
import { Annotation, END, InMemoryStore, START, StateGraph } from '@langchain/langgraph';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import { HeuristicCritic } from '@runledger/critic';
import { SqliteSynchronous } from '@runledger/event-store';
import {
  DEFAULT_MEMORY_POLICY,
  HashingEmbedder,
  MemoryDatabase,
  MemoryService,
  MemoryStore,
  createCriticMemoryHook,
  ToolOutcomeEvent,
  createMemoryEndGuard,
  decide,
  decideAtEnd,
  dedupe,
  InsertDecision,
} from '@runledger/memory';
import { RuntimeEvent, ToolManifest } from '@runledger/contracts';
import { MemoryRecall, ScriptedBackend } from '@runledger/runtime';
import { createSqliteStorage } from '@runledger/state-store';
import { Kysely } from 'kysely';
import {
  AllowAllPolicy,
  InMemoryToolRegistry,
  manifestOf,
  startTestRuntime,
} from '../libs/runtime/src/testing';
import { median } from './bench-support';

const TASKS = Number(process.env.BENCH_TASKS ?? 32);
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const CONCURRENCY = (process.env.BENCH_CONCURRENCY ?? '1,4,16').split(',').map(Number);
/**
 * At 16 at once a run of TASKS (32) tasks is two waves, much of it starting and draining; the same
 * comparison is printed again with this many tasks a run, where both run at their steady rate (0: not)
 */
const STEADY_TASKS = Number(process.env.BENCH_STEADY_TASKS || 128);
if (!Number.isInteger(STEADY_TASKS) || STEADY_TASKS < 0)
  throw new Error(
    `BENCH_STEADY_TASKS must be a whole number, 0 or more, not ${process.env.BENCH_STEADY_TASKS}`,
  );
const STEADY_CONCURRENCY = 16;
/**
 * Critic and memory on again, LangGraph doing the memory work Runledger does (on: printed after the
 * other lines). The lines above keep each LangGraph task's memory in its own graph state: no shared
 * memory, no deduplication, no recall. Here a store with semantic search (LangGraph's InMemoryStore,
 * the same embedder) is shared by every task, each write is deduplicated against it with Runledger's
 * policy, the orchestrator's two turns recall from it, and a completed task writes its plan and a
 * summary, as Runledger's memory end guard does. Its memory is in memory only, where Runledger's is
 * durable.
 */
const LANGGRAPH_STORE = (process.env.BENCH_LANGGRAPH_STORE ?? 'on') !== 'off';
const SYNCHRONOUS = (process.env.BENCH_SYNCHRONOUS ?? 'FULL') as SqliteSynchronous;
/** the step tool declared read-only, as it is (off: declared as a tool with side effects, its intent committed before it runs) */
const TOOL_READ_ONLY = (process.env.BENCH_TOOL_READ_ONLY ?? 'on') !== 'off';
/** the scripted orchestrator is the model, answering in process as LangGraph's does (off: it stands in for a provider, and each call's MODEL_CALLED commits before it) */
const MODEL_IN_PROCESS = (process.env.BENCH_MODEL_IN_PROCESS ?? 'on') !== 'off';
/** appends on the SQLite writer thread, as `npm start` runs them (RUNLEDGER_SQLITE_WRITER_THREAD) */
const WRITER_THREAD = (process.env.BENCH_WRITER_THREAD ?? 'on') !== 'off';
const STEPS = 7;
/** the server's default RUNLEDGER_CHECKPOINT_EVERY_EVENTS */
const CHECKPOINT_EVERY_EVENTS = 50;
const EMBEDDING_DIM = 384;

/** The tool every step runs: a SHA-256 chain over its input, as a line of text. */
function digestTool(text: string): string {
  let h = text;
  for (let i = 0; i < 50; i++) h = createHash('sha256').update(h).digest('hex');
  return `digest of ${text.length} characters: ${h}`;
}

const DIGEST: ToolManifest = manifestOf('digest', {
  description: 'A SHA-256 chain over text.',
  args_schema: {
    type: 'object',
    properties: { text: { type: 'string' } },
    required: ['text'],
    additionalProperties: false,
  },
  idempotent: true,
  // a pure function changes nothing outside the task: its intent needs no commit before it runs
  read_only: TOOL_READ_ONLY,
  timeout_ms: 30_000,
});

const PLAN = {
  type: 'plan',
  steps: Array.from({ length: STEPS }, (_, i) => ({
    id: `s${i + 1}`,
    kind: 'tool',
    tool: 'digest',
    args: { text: i === 0 ? 'the input of the task' : `\${steps.s${i}.output}` },
    depends_on: i === 0 ? [] : [`s${i}`],
  })),
};
const RESPOND = { type: 'respond', content: 'all seven steps done' };

/** The scripted orchestrator's replies to a task: the plan, then the answer. */
const ORCHESTRATOR_SCRIPT = [JSON.stringify(PLAN), JSON.stringify(RESPOND)];

/** Recall across sessions, as the server composes it (benchmarks may not import apps/). */
const recallOver = (service: MemoryService): MemoryRecall => ({
  async recall(query, { k }) {
    // what shapes the context is recorded with it: another process's write racing the recall may be missed
    const hits = await service.search(query, { k, freshness: 'heard' });
    return hits.map((h) => ({ id: h.entry.id, text: h.entry.text, score: h.score }));
  },
});

interface Case {
  concurrency: number;
  criticAndMemory: boolean;
  /** tasks in the run, TASKS unless said */
  tasks?: number;
  /**
   * LangGraph keeps what memory keeps in a store shared by every task, with semantic search, and
   * deduplicates and recalls as Runledger does, rather than in each task's own graph state
   */
  langgraphStore?: boolean;
}

async function inTempDir<T>(work: (dir: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'rl-bench-langgraph-'));
  try {
    return await work(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

interface RunledgerRun {
  seconds: number;
  /** the event store's transactions per task (with the writer thread, one round trip to it each) */
  transactionsPerTask: number;
  /** of those, the ones that wrote events: one fsync each */
  commitsPerTask: number;
  /** how long the main thread was busy per task (event loop utilisation over the run) */
  mainThreadMsPerTask: number;
}

/** `tasks` tasks on Runledger, `concurrency` at a time. */
export function runledger({ concurrency, criticAndMemory, tasks = TASKS }: Case): Promise<RunledgerRun> {
  return inTempDir(async (dir) => {
    const storage = await createSqliteStorage({
      path: join(dir, 'runledger.db'),
      synchronous: SYNCHRONOUS,
      writerThread: WRITER_THREAD,
    });
    // the server opens its writer thread once at boot; here every run opens a fresh database, so wait for it
    await storage.eventStore.ready();
    const memory = criticAndMemory
      ? await MemoryService.open({
          store: new MemoryStore(
            storage.db as unknown as Kysely<MemoryDatabase>,
            storage.lazyDb as unknown as Kysely<MemoryDatabase>,
          ),
          events: storage.eventStore,
          embedder: new HashingEmbedder(EMBEDDING_DIM),
          indexPath: join(dir, 'memory.hnsw'),
          // as the server opens it (apps/controller memory options): index builds run in a worker
          rebuildInBackground: true,
        })
      : null;
    const tools = new InMemoryToolRegistry().add(DIGEST, async (args) => digestTool(String(args.text)));
    const rt = await startTestRuntime({
      store: storage.eventStore,
      tools,
      permissions: new AllowAllPolicy(),
      // a scripted backend answers each task from its own log: every task gets the plan, then the answer
      model: new ScriptedBackend(
        { orchestrator: ORCHESTRATOR_SCRIPT },
        { answersInProcess: MODEL_IN_PROCESS },
      ),
      concurrency,
      checkpoints: { store: storage.checkpoints, everyEvents: CHECKPOINT_EVERY_EVENTS },
      hooks: memory
        ? [createCriticMemoryHook({ critic: new HeuristicCritic(), memory, policy: DEFAULT_MEMORY_POLICY })]
        : [],
      guards: memory ? [createMemoryEndGuard(memory, DEFAULT_MEMORY_POLICY)] : [],
      memory: memory ? recallOver(memory) : null,
    });
    try {
      const before = storage.eventStore.commitStats();
      const busyBefore = performance.eventLoopUtilization();
      const started = performance.now();
      const ids = await Promise.all(
        Array.from({ length: tasks }, (_, i) =>
          rt.runtime.submit({ input: `seven steps, task ${i}` }, { source: 'api' }).then((r) => r.task_id),
        ),
      );
      const finals = await Promise.all(ids.map((id) => rt.runtime.settled(id)));
      const seconds = (performance.now() - started) / 1000;
      const busy = performance.eventLoopUtilization(busyBefore);
      const bad = finals.find((p) => p.final?.stop_reason !== 'completed');
      if (bad)
        throw new Error(`a Runledger task stopped with ${bad.final?.stop_reason}: ${bad.final?.detail}`);
      const after = storage.eventStore.commitStats();
      return {
        seconds,
        transactionsPerTask: (after.transactions - before.transactions) / tasks,
        commitsPerTask: (after.commits - before.commits) / tasks,
        mainThreadMsPerTask: busy.active / tasks,
      };
    } finally {
      await rt.close();
      await memory?.close();
      await storage.close();
    }
  });
}

interface StepMemory {
  text: string;
  weight: number;
  embedding: number[];
}

const GraphState = Annotation.Root({
  input: Annotation<string>,
  plan: Annotation<typeof PLAN.steps>,
  outputs: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
  memory: Annotation<StepMemory[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
  result: Annotation<string>,
  recalled: Annotation<string[]>,
});
type GraphStateType = typeof GraphState.State;

/** Seconds for `tasks` tasks on LangGraph with SqliteSaver, `concurrency` at a time. */
function langgraph({ concurrency, criticAndMemory, tasks = TASKS, langgraphStore }: Case): Promise<number> {
  return inTempDir(async (dir) => {
    const saver = SqliteSaver.fromConnString(join(dir, 'langgraph.db'));
    // the scripted orchestrator: a task's n-th reply of the script, parsed as Runledger parses a directive
    const [planReply, respondReply] = ORCHESTRATOR_SCRIPT;
    const orchestrator = (reply: string) =>
      JSON.parse(reply) as { steps?: typeof PLAN.steps; content?: string };
    const critic = new HeuristicCritic();
    const embedder = new HashingEmbedder(EMBEDDING_DIM);
    const store = criticAndMemory && langgraphStore ? memoryStore(embedder) : null;

    const step = (index: number) => async (state: GraphStateType) => {
      const text = index === 0 ? String(state.plan[0].args.text) : state.outputs[index - 1];
      const output = digestTool(text);
      if (!criticAndMemory) return { outputs: [output] };
      const call_id = `call_${index}`;
      const result = { tool: DIGEST.name, ok: true, output, error: null, metadata: {} };
      const verdict = await critic.evaluate({
        target_event_id: `evt_${index}`,
        call_id,
        tool: DIGEST.name,
        ok: true,
        output,
        error: null,
        metadata: {},
      });
      const outcome = {
        type: 'TOOL_COMPLETED',
        payload: { call_id, tool: DIGEST.name, result },
      } as ToolOutcomeEvent;
      const write = decide(outcome, DIGEST, verdict.score, DEFAULT_MEMORY_POLICY);
      if (write.op === 'none') return { outputs: [output] };
      if (store) {
        await remember(store, write);
        return { outputs: [output] };
      }
      const [embedding] = await embedder.embed([write.text]);
      return {
        outputs: [output],
        memory: [{ text: write.text, weight: write.weight, embedding: [...embedding] }],
      };
    };

    // as Runledger's context builder recalls for every orchestrator call
    const recall = async (input: string) =>
      store
        ? (await store.search(['memory'], { query: input, limit: RECALL_K })).map((h) => h.value.text)
        : [];
    let builder = new StateGraph(GraphState).addNode('planner', async (state: GraphStateType) => ({
      recalled: await recall(state.input),
      plan: orchestrator(planReply).steps!,
    }));
    for (let i = 0; i < STEPS; i++) builder = builder.addNode(`s${i + 1}`, step(i)) as typeof builder;
    builder = builder.addNode('responder', async (state: GraphStateType) => {
      const recalled = await recall(state.input);
      const result = orchestrator(respondReply).content!;
      // as Runledger's memory end guard: the completed plan and a summary of the task
      if (store) for (const candidate of learnedAtEnd(state.input, result)) await remember(store, candidate);
      return { recalled, result };
    }) as typeof builder;
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const edges = builder as any;
    edges.addEdge(START, 'planner');
    edges.addEdge('planner', 's1');
    for (let i = 1; i < STEPS; i++) edges.addEdge(`s${i}`, `s${i + 1}`);
    edges.addEdge(`s${STEPS}`, 'responder');
    edges.addEdge('responder', END);
    const graph = builder.compile({ checkpointer: saver });

    let next = 0;
    const worker = async () => {
      for (let i = next++; i < tasks; i = next++) {
        const out = await graph.invoke(
          { input: `seven steps, task ${i}` },
          { configurable: { thread_id: `task_${i}` } },
        );
        if (out.result !== RESPOND.content || out.outputs.length !== STEPS)
          throw new Error(`a LangGraph task ended with ${JSON.stringify(out.result)}`);
      }
    };
    const started = performance.now();
    await Promise.all(Array.from({ length: concurrency }, worker));
    const seconds = (performance.now() - started) / 1000;
    saver.db.close();
    return seconds;
  });
}

/** Runledger's context builder recalls this many entries */
const RECALL_K = 5;

/** LangGraph's long-term memory as its documentation shows it: a store with semantic search over each value's text. */
function memoryStore(embedder: HashingEmbedder): InMemoryStore {
  const embedDocuments = async (texts: string[]) => (await embedder.embed(texts)).map((v) => [...v]);
  return new InMemoryStore({
    index: {
      dims: EMBEDDING_DIM,
      fields: ['text'],
      embeddings: {
        embedDocuments,
        embedQuery: async (text: string) => (await embedDocuments([text]))[0],
      } as unknown as Embeddings,
    },
  });
}

/** A write the policy decided, as Runledger's memory hook makes it: a near-duplicate of its kind is reinforced instead. */
async function remember(store: InMemoryStore, candidate: InsertDecision): Promise<void> {
  const namespace = ['memory', candidate.kind];
  const [nearest] = await store.search(namespace, { query: candidate.text, limit: 1 });
  const decision = dedupe(
    candidate,
    nearest
      ? {
          entry_id: nearest.key,
          kind: candidate.kind,
          weight: Number(nearest.value.weight),
          similarity: nearest.score ?? 0,
          committed: true,
        }
      : null,
    DEFAULT_MEMORY_POLICY,
  );
  if (decision.op === 'none') return;
  const key = decision.op === 'insert' ? randomUUID() : decision.entry_id;
  const text = decision.op === 'insert' ? decision.text : String(nearest.value.text);
  await store.put(namespace, key, { text, weight: decision.weight });
}

/** What Runledger's memory end guard learns from a task that completed the plan: the same policy, over the events such a task logs. */
function learnedAtEnd(input: string, result: string): InsertDecision[] {
  const events = [
    { type: 'TASK_RECEIVED', payload: { input } },
    { type: 'PLAN_STARTED', payload: { plan_id: 'plan', steps: PLAN.steps } },
    ...PLAN.steps.map(() => ({ type: 'TOOL_CALLED', payload: { tool: DIGEST.name } })),
    {
      type: 'PLAN_COMPLETED',
      payload: { plan_id: 'plan', step_results: PLAN.steps.map(() => ({ status: 'completed' })) },
    },
  ] as unknown as RuntimeEvent[];
  return decideAtEnd(events, 'completed', result, DEFAULT_MEMORY_POLICY);
}

/** Runs `c` on both, RUNS times alternating, and prints the medians and their ratio. */
async function compare(c: Case): Promise<void> {
  const tasks = c.tasks ?? TASKS;
  const ours: number[] = [];
  const theirs: number[] = [];
  let last: RunledgerRun | null = null;
  for (let r = 0; r < RUNS; r++) {
    last = await runledger(c);
    ours.push(tasks / last.seconds);
    theirs.push(tasks / (await langgraph(c)));
  }
  const [a, b] = [median(ours), median(theirs)];
  console.log(
    `critic+memory ${c.criticAndMemory ? 'on ' : 'off'}  ${String(c.concurrency).padStart(2)} at once` +
      `${c.tasks === undefined ? '' : ` (${tasks} tasks a run)`}` +
      `${c.langgraphStore ? ', LangGraph with a memory store' : ''}: ` +
      `Runledger ${a.toFixed(1).padStart(6)} tasks/s, LangGraph ${b.toFixed(1).padStart(6)} tasks/s (baseline), ` +
      `ratio ${(a / b).toFixed(2)}x; Runledger per task: ${last!.transactionsPerTask.toFixed(1)} transactions, ` +
      `${last!.commitsPerTask.toFixed(1)} with events, main thread busy ${last!.mainThreadMsPerTask.toFixed(2)} ms (last run)`,
  );
}

export async function main(): Promise<void> {
  console.log(
    `${STEPS}-step task (scripted orchestrator: plan, ${STEPS} chained tool steps, respond), ${TASKS} tasks per run, ` +
      `median of ${RUNS} alternating runs; Runledger SQLite synchronous=${SYNCHRONOUS} with checkpoints, ` +
      `writer thread ${WRITER_THREAD ? 'on' : 'off'}, step tool ${TOOL_READ_ONLY ? 'read-only' : 'with side effects'}, ` +
      `orchestrator ${MODEL_IN_PROCESS ? 'in process' : 'standing in for a provider'}, ` +
      `LangGraph SqliteSaver at its default`,
  );
  // warm-up, not reported: both compile their hot paths on a first run
  await runledger({ concurrency: 4, criticAndMemory: true });
  await langgraph({ concurrency: 4, criticAndMemory: true });
  for (const criticAndMemory of [false, true])
    for (const concurrency of CONCURRENCY) await compare({ concurrency, criticAndMemory });
  if (STEADY_TASKS > 0 && CONCURRENCY.includes(STEADY_CONCURRENCY))
    for (const criticAndMemory of [false, true])
      await compare({ concurrency: STEADY_CONCURRENCY, criticAndMemory, tasks: STEADY_TASKS });
  if (LANGGRAPH_STORE) {
    await langgraph({ concurrency: 4, criticAndMemory: true, langgraphStore: true });
    for (const concurrency of CONCURRENCY)
      await compare({ concurrency, criticAndMemory: true, langgraphStore: true });
  }
}
