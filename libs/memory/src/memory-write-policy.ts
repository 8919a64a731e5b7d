import {
  CriticScore,
  PendingToolOutcome,
  MemoryKind,
  MemorySource,
  PlanStep,
  RuntimeEvent,
  StopReason,
} from '@runledger/contracts';

export interface MemoryPolicyConfig {
  /** an entry lighter than this is not worth storing */
  min_weight: number;
  /** critic safety below this: never stored */
  min_safety: number;
  /** mean of correctness and usefulness below this: not stored (failures are judged on usefulness alone) */
  min_quality: number;
  /** cosine at or above which a new text is the same memory as an existing one */
  dedup_threshold: number;
  /** how much a duplicate raises the existing entry's weight */
  reinforce_step: number;
  max_text_chars: number;
  /** keep failed tool outcomes as critiques (lessons) */
  store_failures: boolean;
  /** weight of a completed task's summary (input -> result); 0 turns summaries off */
  summary_weight: number;
  /** weight of a plan whose every step completed; 0 turns plans off */
  plan_weight: number;
}

export const DEFAULT_MEMORY_POLICY: MemoryPolicyConfig = {
  min_weight: 0.2,
  min_safety: 0.7,
  min_quality: 0.4,
  dedup_threshold: 0.95,
  reinforce_step: 0.1,
  max_text_chars: 1500,
  store_failures: true,
  summary_weight: 0.5,
  plan_weight: 0.4,
};

/** A tool outcome the policy judges, stored or about to be stored with the write it decides. */
export type ToolOutcomeEvent = PendingToolOutcome;

/** What the policy needs to know about the tool that produced the outcome. */
export interface OutcomeTool {
  name: string;
  sensitive_output: boolean;
  secrets: readonly string[];
}

export type InsertDecision = {
  op: 'insert';
  kind: MemoryKind;
  source: MemorySource;
  weight: number;
  text: string;
  reason: string;
};
export type ReinforceDecision = {
  op: 'reinforce';
  entry_id: string;
  kind: MemoryKind;
  /**
   * the candidate's own text, only when the entry is not committed (see NearestEntry.committed): it
   * stores the entry should that write never commit. Never the entry's text, which may be another
   * session's content.
   */
  text?: string;
  weight: number;
  previous_weight: number;
  reason: string;
};
export type NoWrite = { op: 'none'; reason: string };
export type MemoryDecision = NoWrite | InsertDecision | ReinforceDecision;

/** The nearest existing entry to a candidate text. */
export interface NearestEntry {
  entry_id: string;
  kind: MemoryKind;
  weight: number;
  similarity: number;
  /**
   * whether the entry's insert is committed (applied, or heard committed): false for a write a task
   * decided and has not committed yet, which may commit after a write reinforcing it, or never
   */
  committed: boolean;
}

/** Shapes of credentials that must never be remembered, even when a tool failed to redact them. */
const SECRET_PATTERNS: readonly RegExp[] = [
  /\[REDACTED\]/,
  /-----BEGIN [A-Z ]*PRIVATE KEY-----/,
  /\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}/,
  /\bAKIA[0-9A-Z]{16}\b/,
  /\bgh[pousr]_[A-Za-z0-9]{30,}/,
  /\bxox[abposr]-[A-Za-z0-9-]{10,}/,
  /\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\./,
  /\bbearer\s+[A-Za-z0-9._~+/-]{16,}/i,
  /\b(?:password|passwd|secret|api[_-]?key|token)\s*[=:]\s*\S{6,}/i,
];

export const looksSecret = (text: string): boolean => SECRET_PATTERNS.some((p) => p.test(text));

const TRUNCATED = '…[truncated]';
const clip = (s: string, max: number): string =>
  s.length <= max ? s : `${s.slice(0, max - TRUNCATED.length)}${TRUNCATED}`;
const round3 = (n: number): number => Math.round(n * 1000) / 1000;
/**
 * Fields tools put their text in, in order of preference (stderr last: a command that printed only
 * there still said something); the rest of a structured output is bookkeeping (exit codes, sizes, flags).
 */
const TEXT_FIELDS = ['content', 'text', 'stdout', 'result', 'output', 'stderr'] as const;
const outputText = (output: unknown): string => {
  if (typeof output === 'string') return output;
  if (output == null) return '';
  if (typeof output === 'object' && !Array.isArray(output)) {
    const o = output as Record<string, unknown>;
    const field = TEXT_FIELDS.find((f) => typeof o[f] === 'string' && (o[f] as string).trim() !== '');
    if (field) return o[field] as string;
    // every text field is blank (a command that printed nothing): the bookkeeping alone is no knowledge,
    // and as the same JSON every time it was reinforced on each run until it outweighed real memories
    if (TEXT_FIELDS.some((f) => typeof o[f] === 'string')) return '';
  }
  return JSON.stringify(output);
};

/** Memory tools read and write memory already; their outcomes are not new knowledge. */
const isMemoryTool = (name: string): boolean => name.startsWith('memory_');

/**
 * Pure: whether a scored tool outcome enters memory, as what kind and with what
 * weight. A missing score (the critic failed) never writes.
 */
export function decide(
  event: ToolOutcomeEvent,
  tool: OutcomeTool,
  score: CriticScore | null,
  config: MemoryPolicyConfig = DEFAULT_MEMORY_POLICY,
): NoWrite | InsertDecision {
  if (!score) return { op: 'none', reason: 'no critic score' };
  if (tool.sensitive_output) return { op: 'none', reason: 'tool output is marked sensitive' };
  if (tool.secrets.length > 0) return { op: 'none', reason: 'tool runs with secrets' };
  if (isMemoryTool(tool.name)) return { op: 'none', reason: 'memory tool outcome' };
  if (!score.memory_store) return { op: 'none', reason: 'critic: not worth storing' };
  if (score.safety < config.min_safety)
    return { op: 'none', reason: `safety ${score.safety} < ${config.min_safety}` };
  if (score.weight < config.min_weight)
    return { op: 'none', reason: `weight ${score.weight} < ${config.min_weight}` };

  const failed = event.type === 'TOOL_FAILED' || event.payload.result?.ok === false;
  let candidate: InsertDecision;
  if (failed) {
    if (!config.store_failures) return { op: 'none', reason: 'failures are not stored' };
    const error =
      event.type === 'TOOL_FAILED' ? event.payload.error : (event.payload.result.error ?? 'failed');
    if (
      event.type === 'TOOL_FAILED' &&
      ['permission_denied', 'hard_stop', 'outcome_unknown'].includes(event.payload.error_kind)
    ) {
      return {
        op: 'none',
        reason: `failure kind ${event.payload.error_kind} teaches nothing about the tool`,
      };
    }
    if (score.usefulness < config.min_quality)
      return { op: 'none', reason: `usefulness ${score.usefulness} < ${config.min_quality}` };
    const lesson = score.notes ? ` (critic: ${score.notes})` : '';
    candidate = {
      op: 'insert',
      kind: 'critique',
      source: 'critic',
      weight: round3(score.weight),
      text: clip(`${tool.name} failed: ${error}${lesson}`, config.max_text_chars),
      reason: 'failed outcome kept as a lesson',
    };
  } else {
    const quality = (score.correctness + score.usefulness) / 2;
    if (quality < config.min_quality)
      return { op: 'none', reason: `quality ${round3(quality)} < ${config.min_quality}` };
    const output = outputText(event.type === 'TOOL_COMPLETED' ? event.payload.result.output : null).trim();
    if (!output) return { op: 'none', reason: 'empty output' };
    candidate = {
      op: 'insert',
      kind: 'tool_result',
      source: 'tool',
      weight: round3(score.weight),
      text: clip(`${tool.name}: ${output}`, config.max_text_chars),
      reason: `critic quality ${round3(quality)}`,
    };
  }
  if (looksSecret(candidate.text)) return { op: 'none', reason: 'text looks like it holds a secret' };
  return candidate;
}

/**
 * Pure: an insert whose text is a near-duplicate of an existing entry of the
 * same kind raises that entry's weight instead. The reinforce names the entry by
 * id and copies none of its text.
 */
export function dedupe(
  candidate: InsertDecision,
  nearest: NearestEntry | null,
  config: MemoryPolicyConfig = DEFAULT_MEMORY_POLICY,
): MemoryDecision {
  if (!nearest || nearest.kind !== candidate.kind || nearest.similarity < config.dedup_threshold)
    return candidate;
  const weight = round3(Math.min(1, Math.max(nearest.weight, candidate.weight) + config.reinforce_step));
  if (weight <= nearest.weight)
    return { op: 'none', reason: `duplicate of ${nearest.entry_id}, already at weight ${nearest.weight}` };
  return {
    op: 'reinforce',
    entry_id: nearest.entry_id,
    kind: nearest.kind,
    ...(nearest.committed ? {} : { text: candidate.text }),
    weight,
    previous_weight: nearest.weight,
    reason: `near-duplicate (cosine ${round3(nearest.similarity)}) of ${nearest.entry_id}`,
  };
}

const stepText = (step: PlanStep): string =>
  step.tool
    ? `${step.tool}(${clip(JSON.stringify(step.args), 200)})`
    : `${step.kind}: ${clip(step.description, 200)}`;

/**
 * Pure: what a task that ended teaches, from its log. A completed task leaves a
 * summary (its input and result); a plan whose steps all completed leaves the
 * plan, so a later task with a similar input can reuse its shape. A task whose
 * tool calls were all memory tools, or that only sys_util answered without a
 * tool, leaves nothing; anything that looks like a secret is left out.
 */
export function decideAtEnd(
  events: readonly RuntimeEvent[],
  stopReason: StopReason,
  result: string | null,
  config: MemoryPolicyConfig = DEFAULT_MEMORY_POLICY,
): InsertDecision[] {
  if (stopReason !== 'completed') return [];
  const received = events.find(
    (e): e is Extract<RuntimeEvent, { type: 'TASK_RECEIVED' }> => e.type === 'TASK_RECEIVED',
  );
  if (!received) return [];
  // a task that only read or wrote memory learned nothing new: its result is memory already, and a
  // summary of it would copy entries (even ones deleted later) back into memory on every recall
  const tools = events.flatMap((e) => (e.type === 'TOOL_CALLED' ? [e.payload.tool] : []));
  if (tools.length > 0 && tools.every(isMemoryTool)) return [];
  // sys_util knows nothing: a reply it gave without running anything is its help text, not knowledge
  const routers = events.flatMap((e) => (e.type === 'ROUTER_DECIDED' ? [e.payload.source] : []));
  if (tools.length === 0 && routers.length > 0 && routers.every((r) => r === 'sys_util')) return [];
  const input = clip(received.payload.input.trim(), 400);
  const out: InsertDecision[] = [];
  if (config.plan_weight > 0) {
    const plans = new Map<string, PlanStep[]>();
    for (const e of events) {
      if (e.type === 'PLAN_STARTED') plans.set(e.payload.plan_id, e.payload.steps);
      if (e.type === 'PLAN_COMPLETED' && e.payload.step_results.every((r) => r.status === 'completed')) {
        const steps = plans.get(e.payload.plan_id);
        if (steps)
          out.push({
            op: 'insert',
            kind: 'plan',
            source: 'system',
            weight: config.plan_weight,
            text: clip(`plan for "${input}": ${steps.map(stepText).join(' -> ')}`, config.max_text_chars),
            reason: `plan ${e.payload.plan_id} completed every step`,
          });
      }
    }
  }
  if (config.summary_weight > 0 && result?.trim()) {
    out.push({
      op: 'insert',
      kind: 'summary',
      source: 'system',
      weight: config.summary_weight,
      text: clip(`task "${input}" -> ${result.trim()}`, config.max_text_chars),
      reason: 'task completed',
    });
  }
  return out.filter((d) => !looksSecret(d.text));
}
