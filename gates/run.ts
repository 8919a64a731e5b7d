/**
 * npm run gates [-- --thresholds <file>] [--only <gate>[,<gate>...]]
 * Runs the quality gates' workloads, prints one table (measured, threshold, verdict, what was seen)
 * and exits 1 when a gate fails, 2 when the thresholds file or an option is wrong. The thresholds
 * and the reason for each are in gates/thresholds.json.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import { measureContextGrowth } from './context-growth';
import { measureHangs } from './hangs';
import { measureMalformedTurns } from './malformed-turns';
import { measureReplayDeterminism } from './replay-determinism';
import { measureTokensPerTask } from './tokens-per-task';

interface Measured {
  value: number;
  detail: string;
}

const GATES: Record<string, () => Promise<Measured>> = {
  context_growth: async () => {
    const m = await measureContextGrowth();
    return {
      value: m.stop_reason === 'completed' ? m.steady_slope : Number.POSITIVE_INFINITY,
      detail: `${m.rounds} rounds (${m.stop_reason}), first half ${m.early_slope.toFixed(1)} chars/round, max prompt ${m.max_prompt_chars} chars`,
    };
  },
  malformed_tool_turns: async () => {
    const m = await measureMalformedTurns();
    return {
      value: m.malformed_received + m.malformed_recorded,
      detail: `${m.tasks} misbehaving tasks, ${m.requests} requests, ${m.turns_sent} tool turns sent${m.first_problem ? `; ${m.first_problem}` : ''}`,
    };
  },
  hangs: async () => {
    const m = await measureHangs();
    return {
      value: m.hung,
      detail: `${m.tasks} tasks (${m.stop_reasons.join(', ')}), the latest stopped ${m.max_overrun_ms} ms after its budget`,
    };
  },
  tokens_per_task: async () => {
    const m = await measureTokensPerTask();
    return {
      value: m.completed === m.tasks ? m.tokens_per_completed_task : Number.POSITIVE_INFINITY,
      detail: `${m.completed} of ${m.tasks} tasks completed`,
    };
  },
  replay_divergence: async () => {
    const m = await measureReplayDeterminism();
    return {
      value: m.diverged,
      detail: `${m.bundles} bundles, each replayed twice${m.first_divergence ? `; ${m.first_divergence}` : ''}`,
    };
  },
};

const Threshold = z.object({ max: z.number(), unit: z.string().min(1), reason: z.string().min(1) }).strict();
const Thresholds = z.record(z.string(), Threshold);

class UsageError extends Error {}

function options(argv: readonly string[]): { thresholds: string; only: string[] } {
  let thresholds = join(__dirname, 'thresholds.json');
  let only = Object.keys(GATES);
  for (let i = 0; i < argv.length; i++) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (flag === '--thresholds' && value) thresholds = resolve(value);
    else if (flag === '--only' && value) only = value.split(',');
    else
      throw new UsageError(
        `unknown option ${flag ?? ''}; gates take --thresholds <file> and --only <gate,...>`,
      );
    i++;
  }
  const unknown = only.filter((g) => !(g in GATES));
  if (unknown.length)
    throw new UsageError(`unknown gate ${unknown.join(', ')} (the gates: ${Object.keys(GATES).join(', ')})`);
  return { thresholds, only };
}

function readThresholds(file: string): z.infer<typeof Thresholds> {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new UsageError(`${file}: ${(e as Error).message}`);
  }
  const parsed = Thresholds.safeParse(json);
  if (!parsed.success)
    throw new UsageError(
      `${file}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
    );
  const missing = Object.keys(GATES).filter((g) => !(g in parsed.data));
  if (missing.length) throw new UsageError(`${file}: no threshold for ${missing.join(', ')}`);
  return parsed.data;
}

const shown = (n: number) => (Number.isFinite(n) ? (Number.isInteger(n) ? String(n) : n.toFixed(1)) : 'n/a');

export async function main(argv: readonly string[]): Promise<number> {
  let chosen: ReturnType<typeof options>;
  let thresholds: z.infer<typeof Thresholds>;
  try {
    chosen = options(argv);
    thresholds = readThresholds(chosen.thresholds);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    console.error(`gates: ${e.message}`);
    return 2;
  }
  const rows: string[][] = [];
  let failed = 0;
  for (const gate of chosen.only) {
    const t = thresholds[gate];
    const started = Date.now();
    let m: Measured;
    try {
      m = await GATES[gate]();
    } catch (e) {
      m = { value: Number.POSITIVE_INFINITY, detail: `the workload failed: ${(e as Error).message}` };
    }
    const pass = m.value <= t.max;
    if (!pass) failed++;
    rows.push([
      gate,
      shown(m.value),
      `<= ${t.max}`,
      t.unit,
      pass ? 'PASS' : 'FAIL',
      `${Date.now() - started} ms`,
      m.detail,
    ]);
  }
  const header = ['gate', 'measured', 'threshold', 'unit', 'verdict', 'took', 'what was seen'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]))).join(' | ');
  console.log(line(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('-|-'));
  for (const r of rows) console.log(line(r));
  console.log(
    failed
      ? `${failed} of ${rows.length} gate(s) failed (thresholds: ${chosen.thresholds})`
      : `all ${rows.length} gates passed`,
  );
  return failed ? 1 : 0;
}

// the workloads' servers and never-answering calls are not waited for: the verdict is in
void main(process.argv.slice(2)).then((code) => process.exit(code));
