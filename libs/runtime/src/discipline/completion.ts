import { ExecutionDirective, RuntimeEvent } from '@runledger/contracts';
import { parseDirective } from '../model/directive-parser';

/**
 * The completion protocol: what a piece of orchestrator text is, and what to
 * do when it carries no directive. Two paths stay apart: text that tries to be
 * a directive and fails goes to validation (correction, then sys_util); text
 * that does not try at all gets a reminder, and after N misses in a row the
 * task stops with missing_completion_signal.
 */
export type OrchestratorText =
  | { kind: 'directive'; directive: ExecutionDirective; cleaned: string; fabricated: string[] }
  | { kind: 'attempted_directive'; error: string; cleaned: string; fabricated: string[] }
  | { kind: 'no_attempt'; error: string; cleaned: string; fabricated: string[] };

const FENCE = /```([A-Za-z0-9_-]*)[ \t]*\r?\n([\s\S]*?)```/g;
const RESULT_FENCE_LANGS = ['tool_result', 'tool_output', 'observation', 'output', 'result'];
const RESULT_TAGS = ['tool_result', 'tool_response', 'tool_output', 'function_results', 'observation'];
/** A line that presents what follows as a tool's output; the block runs to the next blank line. */
const RESULT_MARKER =
  /^[ \t>*_`[]*(?:TOOL[_ ]RESULT|TOOL[_ ]OUTPUT|TOOL[_ ]RESPONSE|FUNCTION[_ ]RESULT|OBSERVATION)\b[\]*_`]*\s*:?.*$/im;
const DIRECTIVE_TYPES = ['plan', 'tool', 'respond', 'fail', 'delegate'];

function isResultShaped(value: unknown): boolean {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return false;
  const o = value as Record<string, unknown>;
  if (typeof o.type === 'string' && DIRECTIVE_TYPES.includes(o.type)) return false;
  const keys = Object.keys(o);
  const has = (...k: string[]) => k.every((x) => keys.includes(x));
  return (
    has('ok', 'output') || has('tool', 'result') || has('exit_code') || has('stdout') || has('tool_result')
  );
}

const tryJson = (text: string): { ok: true; value: unknown } | { ok: false } => {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch {
    return { ok: false };
  }
};

/**
 * Remove text that pretends to be a tool result: marker lines ("TOOL_RESULT:",
 * "Observation:") with their block, <tool_result> style tags, result-labelled
 * fences, and JSON objects shaped like a ToolResult. Only the runtime reports
 * tool results; what a model claims is never evidence.
 */
export function stripFabricatedResults(text: string): { cleaned: string; removed: string[] } {
  const removed: string[] = [];
  let out = text;
  for (const tag of RESULT_TAGS) {
    out = out.replace(new RegExp(`<${tag}\\b[^>]*>[\\s\\S]*?(?:</${tag}>|$)`, 'gi'), (m) => {
      removed.push(m);
      return '';
    });
  }
  out = out.replace(FENCE, (m, lang: string, body: string) => {
    const parsed = tryJson(body.trim());
    if (RESULT_FENCE_LANGS.includes(lang.toLowerCase()) || (parsed.ok && isResultShaped(parsed.value))) {
      removed.push(m);
      return '';
    }
    return m;
  });
  for (;;) {
    const m = RESULT_MARKER.exec(out);
    if (!m) break;
    const rest = out.slice(m.index);
    const end = rest.search(/\n[ \t]*\n/);
    const block = end === -1 ? rest : rest.slice(0, end);
    removed.push(block);
    out = out.slice(0, m.index) + (end === -1 ? '' : rest.slice(end + 1));
  }
  const bare = out.trim();
  if (bare.startsWith('{')) {
    const parsed = tryJson(bare);
    if (parsed.ok && isResultShaped(parsed.value)) {
      removed.push(bare);
      out = '';
    }
  }
  return { cleaned: out.trim(), removed };
}

/**
 * A reply of the orchestrator, fabricated tool results cut out first, then
 * parsed by the runtime's directive parser: a directive, an attempt at one
 * (JSON or a fenced block that fails parsing or the schema), or no attempt.
 */
export function classifyOrchestratorText(raw: string | null | undefined): OrchestratorText {
  const { cleaned, removed: fabricated } = stripFabricatedResults(raw ?? '');
  const parsed = parseDirective(cleaned);
  if (parsed.ok) return { kind: 'directive', directive: parsed.directive, cleaned, fabricated };
  return {
    kind: parsed.attempted ? 'attempted_directive' : 'no_attempt',
    error: parsed.error,
    cleaned,
    fabricated,
  };
}

export const COMPLETION_REMINDER =
  'Your last reply contained no directive. Answer with exactly one JSON ExecutionDirective: ' +
  '{"type":"respond","content":"..."} when you are done, {"type":"tool",...} or {"type":"plan",...} to act, ' +
  'or {"type":"fail","reason":"..."} when the task cannot be done.';

export const FABRICATION_NOTE =
  'Your last reply contained text presented as a tool result. It was removed: only the runtime runs tools and reports their results.';

export interface CompletionState {
  /** consecutive rounds whose orchestrator text had no directive attempt */
  misses: number;
}
export const initialCompletionState = (): CompletionState => ({ misses: 0 });

/** What a round's orchestrator output was, as far as the protocol cares. */
export type RoundOutcome = 'no_attempt' | 'tool_call' | 'other';

export type CompletionVerdict =
  | { action: 'continue'; state: CompletionState }
  | { action: 'remind'; state: CompletionState; detail: string }
  | { action: 'stop'; state: CompletionState; detail: string };

export function completionStep(
  state: CompletionState,
  outcome: RoundOutcome,
  maxMisses: number,
): CompletionVerdict {
  if (outcome === 'tool_call') return { action: 'continue', state: { misses: 0 } };
  if (outcome === 'other') return { action: 'continue', state };
  const misses = state.misses + 1;
  if (misses >= maxMisses) {
    return {
      action: 'stop',
      state: { misses },
      detail: `the orchestrator answered ${misses} times in a row without a directive`,
    };
  }
  return {
    action: 'remind',
    state: { misses },
    detail: `no directive (miss ${misses} of ${maxMisses}); reminded`,
  };
}

/** One event into the protocol's state: reminders since the last tool call are the misses so far. */
export function completionEvolve(state: CompletionState, event: RuntimeEvent): CompletionState {
  if (event.type === 'TOOL_CALLED') return state.misses === 0 ? state : { misses: 0 };
  if (event.type === 'GUARD_TRIGGERED' && event.payload.guard === 'completion_reminder')
    return { misses: state.misses + 1 };
  return state;
}

/** The protocol's state from the log. */
export const completionStateFromEvents = (events: readonly RuntimeEvent[]): CompletionState =>
  events.reduce(completionEvolve, initialCompletionState());
