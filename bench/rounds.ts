/**
 * npm run bench -- rounds
 * What one round costs as a task grows: a scripted orchestrator calls a cheap
 * in-memory tool (`tick`, new arguments every round, so the repeat detector
 * stays quiet) for N rounds, then responds, with run discipline on, its
 * budgets raised so nothing stops the task early, and checkpoints as the
 * server saves them by default. The tool stamps the time (and the process's
 * CPU time) of each call; a round's cost is the time between two calls
 * (context, routing, guards, gates, checkpoints, the events it appends).
 * Each length runs BENCH_RUNS (5) times. Printed per task length, as medians
 * over those runs: the mean round cost of the second tenth of the rounds (the
 * baseline, same task), of the last tenth, and their ratio (each run's ratio
 * listed too), then the same for the per-round medians and for CPU time (both
 * less moved by a busy machine). Flat per-round cost gives a ratio near 1. A
 * 50-round task runs first, unreported, to warm the JIT up.
 * Env: BENCH_ROUNDS (10,100,1000), BENCH_RUNS (5), BENCH_SYNCHRONOUS (NORMAL),
 * BENCH_CHECKPOINTS (on; off runs without).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteSynchronous } from '@runledger/event-store';
import {
  DEFAULT_BUDGET_MAXIMUMS,
  DEFAULT_DISCIPLINE_SETTINGS,
  ResolvedBudgets,
  ScriptedBackend,
} from '@runledger/runtime';
import { createSqliteStorage } from '@runledger/state-store';
import {
  AllowAllPolicy,
  InMemoryToolRegistry,
  manifestOf,
  startTestRuntime,
} from '../libs/runtime/src/testing';
import { median, recordFigure } from './bench-support';

const ROUNDS = (process.env.BENCH_ROUNDS ?? '10,100,1000').split(',').map(Number);
const SYNCHRONOUS = (process.env.BENCH_SYNCHRONOUS ?? 'NORMAL') as SqliteSynchronous;
const CHECKPOINTS = (process.env.BENCH_CHECKPOINTS ?? 'on') === 'on';
/** the server's default RUNLEDGER_CHECKPOINT_EVERY_EVENTS */
const CHECKPOINT_EVERY_EVENTS = 50;
const WARM_UP_ROUNDS = 50;
/** tasks run per length; every figure printed is the median over them */
const RUNS = Number(process.env.BENCH_RUNS ?? 5);

/** Budgets no bench task reaches: the rounds, not a limit, end it. */
function roomyBudgets(rounds: number): ResolvedBudgets {
  const calls = rounds * 4;
  return {
    ...DEFAULT_BUDGET_MAXIMUMS,
    max_rounds: rounds + 2,
    max_tool_calls: calls,
    max_model_calls: calls,
    max_failures: calls,
    max_tokens: Number.MAX_SAFE_INTEGER,
    timeout_ms: 24 * 3_600_000,
  };
}

interface Ticks {
  /** wall-clock ms of each call to `tick`, one per round */
  wall: number[];
  /** the process's CPU ms (user + system) at each call */
  cpu: number[];
}

const cpuMs = (): number => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};

async function runTask(rounds: number): Promise<Ticks> {
  const dir = mkdtempSync(join(tmpdir(), 'rl-bench-rounds-'));
  const storage = await createSqliteStorage({ path: join(dir, 'bench.db'), synchronous: SYNCHRONOUS });
  const ticks: Ticks = { wall: [], cpu: [] };
  const tools = new InMemoryToolRegistry().add(
    manifestOf('tick', {
      description: 'Returns its number.',
      args_schema: {
        type: 'object',
        properties: { n: { type: 'integer' } },
        required: ['n'],
        additionalProperties: false,
      },
      idempotent: true,
      timeout_ms: 30_000,
    }),
    async (args) => {
      ticks.wall.push(performance.now());
      ticks.cpu.push(cpuMs());
      return args.n;
    },
  );
  const script = [
    ...Array.from({ length: rounds }, (_, n) => JSON.stringify({ type: 'tool', tool: 'tick', args: { n } })),
    JSON.stringify({ type: 'respond', content: 'done' }),
  ];
  const budgets = roomyBudgets(rounds);
  const rt = await startTestRuntime({
    store: storage.eventStore,
    tools,
    permissions: new AllowAllPolicy(),
    model: new ScriptedBackend({ orchestrator: script }),
    discipline: { ...DEFAULT_DISCIPLINE_SETTINGS, budgetDefaults: budgets, budgetMaximums: budgets },
    maxRounds: rounds + 2,
    concurrency: 1,
    checkpoints: CHECKPOINTS ? { store: storage.checkpoints, everyEvents: CHECKPOINT_EVERY_EVENTS } : null,
  });
  try {
    const { task_id } = await rt.runtime.submit({ input: `tick ${rounds} times` }, { source: 'api' });
    const final = await rt.runtime.settled(task_id);
    if (final.final?.stop_reason !== 'completed')
      throw new Error(`bench task stopped with ${final.final?.stop_reason}: ${final.final?.detail}`);
    if (ticks.wall.length !== rounds)
      throw new Error(`expected ${rounds} tool calls, saw ${ticks.wall.length}`);
    return ticks;
  } finally {
    await rt.close();
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Gaps between consecutive ticks whose later tick falls in tenth `k` (0-based) of the rounds. */
function roundCosts(ticks: readonly number[], k: number): number[] {
  const size = Math.max(1, Math.floor(ticks.length / 10));
  const from = Math.max(1, k * size);
  const to = k === 9 ? ticks.length : Math.min(ticks.length, (k + 1) * size);
  const gaps: number[] = [];
  for (let i = from; i < to; i++) gaps.push(ticks[i] - ticks[i - 1]);
  return gaps;
}

/** Mean cost of a round over the whole task: first call to last. */
const perRound = (stamps: readonly number[]): number =>
  (stamps[stamps.length - 1] - stamps[0]) / Math.max(1, stamps.length - 1);

const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);

/** One task's figures: its whole-run cost per round and its last tenth against its second. */
interface TaskFigures {
  total: number;
  perRound: number;
  perRoundCpu: number;
  second: number;
  last: number;
  medianSecond: number;
  medianLast: number;
  cpuSecond: number;
  cpuLast: number;
}

async function measure(rounds: number): Promise<TaskFigures> {
  const started = performance.now();
  const ticks = await runTask(rounds);
  const total = performance.now() - started;
  const [second, last] = [1, 9].map((k) => roundCosts(ticks.wall, k));
  const [cpuSecond, cpuLast] = [1, 9].map((k) => roundCosts(ticks.cpu, k));
  return {
    total,
    perRound: perRound(ticks.wall),
    perRoundCpu: perRound(ticks.cpu),
    second: mean(second),
    last: mean(last),
    medianSecond: median(second),
    medianLast: median(last),
    cpuSecond: mean(cpuSecond),
    cpuLast: mean(cpuLast),
  };
}

/** the most a late round may cost against an early one for a task to count as flat */
const FLAT_TARGET = 1.5;

export async function main(): Promise<void> {
  console.log(
    `scripted orchestrator calling an in-memory tool once per round, run discipline on, ` +
      `checkpoints ${CHECKPOINTS ? `on (every round, ${CHECKPOINT_EVERY_EVENTS} events at most)` : 'off'}, ` +
      `SQLite synchronous=${SYNCHRONOUS}; each length run ${RUNS} times, figures are medians over the runs`,
  );
  const bad = ROUNDS.find((n) => !Number.isInteger(n) || n < 10);
  if (bad !== undefined) throw new Error(`BENCH_ROUNDS: ${bad} is not a whole number of at least 10`);
  if (!Number.isInteger(RUNS) || RUNS < 1)
    throw new Error(`BENCH_RUNS: ${RUNS} is not a whole number of at least 1`);
  // Not reported: compiles the hot paths, so the first task measured is not the one paying for it.
  await runTask(WARM_UP_ROUNDS);
  for (const rounds of ROUNDS) {
    const runs: TaskFigures[] = [];
    for (let i = 0; i < RUNS; i++) runs.push(await measure(rounds));
    const of = (pick: (f: TaskFigures) => number) => median(runs.map(pick));
    const ratios = runs.map((f) => f.last / f.second).sort((a, b) => a - b);
    console.log(
      `${String(rounds).padStart(5)} rounds: ${of((f) => f.total).toFixed(0)} ms total with start and end, ` +
        `${of((f) => f.perRound).toFixed(2)} ms/round (CPU ${of((f) => f.perRoundCpu).toFixed(2)}); ` +
        `second tenth ${of((f) => f.second).toFixed(2)} ms/round (baseline), last tenth ${of((f) => f.last).toFixed(2)} ms/round, ` +
        `ratio ${of((f) => f.last / f.second).toFixed(2)}x (runs ${ratios.map((r) => r.toFixed(2)).join(' / ')}); ` +
        `medians ${of((f) => f.medianSecond).toFixed(2)} / ${of((f) => f.medianLast).toFixed(2)} ms/round, ` +
        `ratio ${of((f) => f.medianLast / f.medianSecond).toFixed(2)}x; ` +
        `CPU ${of((f) => f.cpuSecond).toFixed(2)} / ${of((f) => f.cpuLast).toFixed(2)} ms/round, ` +
        `ratio ${of((f) => f.cpuLast / f.cpuSecond).toFixed(2)}x`,
    );
    if (rounds === Math.max(...ROUNDS)) {
      const ratio = of((f) => f.medianLast / f.medianSecond);
      recordFigure({
        figure: `${rounds}-round task flat: median round of the last tenth against the second`,
        value: `${of((f) => f.medianSecond).toFixed(2)} / ${of((f) => f.medianLast).toFixed(2)} ms/round`,
        ratio,
        target: `<= ${FLAT_TARGET}x`,
        met: ratio <= FLAT_TARGET,
      });
    }
  }
}
