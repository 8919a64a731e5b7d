import { posix } from 'node:path';
import {
  AcceptCheck,
  EventPayload,
  RuntimeEvent,
  WorkspaceObservation,
  canonicalJson,
} from '@runledger/contracts';
import { matches } from './check-match';
import { ToolFact, finalAnswer, toolFacts } from './round-facts';
import { WorkspaceView } from './workspace-view';
import { TodoState, initialTodoState, judgeTodos } from './todos';

export type AcceptCheckResult = EventPayload<'ACCEPTANCE_DECIDED'>['results'][number];

export interface AcceptanceDecision {
  passed: boolean;
  results: AcceptCheckResult[];
  /** the first required check that failed: its id and detail go into the accept_check_failed stop */
  failing: AcceptCheckResult | null;
}

/** Tool names the built-in tools use; a check may name others in params.tools / params.tool. */
export const WRITE_TOOLS = ['file_write', 'file_edit', 'file_delete'];
export const READ_TOOLS = ['file_read'];
export const SHELL_TOOLS = ['shell_exec'];

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const record = (v: unknown): Record<string, unknown> =>
  v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};

const normPath = (p: string): string =>
  posix.normalize(p.replace(/\\/g, '/')).replace(/^\.\//, '').replace(/\/$/, '');
/** Tools resolve relative paths inside the allowed root; an absolute path recorded by a tool matches by suffix. */
export function samePath(recorded: string, target: string): boolean {
  const a = normPath(recorded);
  const b = normPath(target);
  if (a === b) return true;
  if (a.startsWith('/') && !b.startsWith('/')) return a.endsWith(`/${b}`);
  if (b.startsWith('/') && !a.startsWith('/')) return b.endsWith(`/${a}`);
  return false;
}
const under = (recorded: string, dir: string): boolean => {
  const d = normPath(dir);
  const r = normPath(recorded);
  return (
    d === '' || d === '.' || r === d || r.startsWith(`${d}/`) || (r.startsWith('/') && r.includes(`/${d}/`))
  );
};

export const pathOf = (f: ToolFact): string | null =>
  str(f.args.path) ?? str(f.args.file) ?? str(f.args.file_path);
export const commandOf = (f: ToolFact): string | null => str(f.args.command) ?? str(f.args.cmd);

function exitCodeOf(f: ToolFact): number | null {
  const o = record(f.output);
  for (const k of ['exit_code', 'exitCode', 'code']) if (typeof o[k] === 'number') return o[k] as number;
  return null;
}

function textOf(output: unknown): string {
  if (typeof output === 'string') return output;
  const o = record(output);
  for (const k of ['content', 'stdout', 'text']) if (typeof o[k] === 'string') return o[k] as string;
  return canonicalJson(output ?? null);
}

const toolsParam = (check: AcceptCheck, defaults: string[]): string[] => {
  const p = check.params.tools ?? check.params.tool;
  if (typeof p === 'string') return [p];
  if (Array.isArray(p)) return p.filter((x): x is string => typeof x === 'string');
  return defaults;
};

function field(value: unknown, path: string): unknown {
  return path
    .split('.')
    .reduce<unknown>(
      (v, k) => (v && typeof v === 'object' ? (v as Record<string, unknown>)[k] : undefined),
      value,
    );
}

const argsInclude = (args: Record<string, unknown>, want: Record<string, unknown>): boolean =>
  Object.entries(want).every(([k, v]) => canonicalJson(args[k]) === canonicalJson(v));

type Verdict = { passed: boolean; detail: string; observed?: WorkspaceObservation };

/**
 * What the log says a file holds after the last recorded fact about it: the
 * content written (an append adds to what was known), the content read, or
 * null when it was deleted; null when nothing was recorded. A shell command
 * run after that fact may have changed the file behind the log's back, so the
 * fact no longer settles a check.
 */
function lastKnownContent(facts: readonly ToolFact[], target: string) {
  type Known = { content: string | null; source: string; stale: boolean };
  let known = null as Known | null;
  for (const f of facts) {
    if (known && SHELL_TOOLS.includes(f.tool) && f.ok !== null) {
      known.stale = true;
      continue;
    }
    const p = pathOf(f);
    if (f.ok !== true || p === null || !samePath(p, target)) continue;
    if (f.tool === 'file_delete') known = { content: null, source: `deleted by ${f.call_id}`, stale: false };
    else if (WRITE_TOOLS.includes(f.tool) && str(f.args.content) !== null) {
      const written = str(f.args.content) as string;
      known =
        f.args.mode === 'append'
          ? {
              content: `${known?.content ?? ''}${written}`,
              source: `appended by ${f.call_id}`,
              stale: known?.stale ?? false,
            }
          : { content: written, source: `written by ${f.call_id}`, stale: false };
    } else if (READ_TOOLS.includes(f.tool))
      known = { content: textOf(f.output), source: `read by ${f.call_id}`, stale: false };
  }
  return known;
}

/** A file check the log does not settle, judged from what the workspace view saw. */
function judgeObserved(check: AcceptCheck, observed: WorkspaceObservation): Verdict {
  const why = observed.note ? ` (${observed.note})` : '';
  if (!observed.exists)
    return { passed: false, detail: `${check.target} is not in the workspace${why}`, observed };
  if (check.kind === 'file_exists')
    return { passed: true, detail: `${check.target} is in the workspace (${observed.size} bytes)`, observed };
  return observed.excerpt !== null
    ? {
        passed: true,
        detail: `${check.target} in the workspace contains ${JSON.stringify(check.match)}`,
        observed,
      }
    : {
        passed: false,
        detail: `${check.target} in the workspace does not contain ${JSON.stringify(check.match)}${why}`,
        observed,
      };
}

function judge(
  check: AcceptCheck,
  facts: readonly ToolFact[],
  answer: string | null,
  workspace: WorkspaceView | null,
  todos: TodoState,
): Verdict {
  const look = () => workspace?.observe(check) ?? null;
  switch (check.kind) {
    case 'todos_done': {
      const { passed, detail } = judgeTodos(todos, check)!;
      return { passed, detail };
    }
    case 'output_only': {
      if (answer === null || answer.trim() === '')
        return { passed: false, detail: 'the task gave no answer' };
      return matches(answer, check)
        ? {
            passed: true,
            detail:
              check.match === null
                ? 'the task answered'
                : `the answer contains ${JSON.stringify(check.match)}`,
          }
        : { passed: false, detail: `the answer does not contain ${JSON.stringify(check.match)}` };
    }
    case 'workspace_change': {
      const tools = toolsParam(check, WRITE_TOOLS);
      const hit = facts.find(
        (f) =>
          f.ok === true &&
          tools.includes(f.tool) &&
          (check.target === '' || (pathOf(f) !== null && under(pathOf(f) as string, check.target))),
      );
      return hit
        ? { passed: true, detail: `${hit.tool} changed ${pathOf(hit) ?? 'the workspace'} (${hit.call_id})` }
        : {
            passed: false,
            detail: `no successful ${tools.join('/')} call${check.target ? ` under ${check.target}` : ''} was recorded`,
          };
    }
    case 'command_success': {
      const tools = toolsParam(check, SHELL_TOOLS);
      const runs = facts.filter(
        (f) =>
          tools.includes(f.tool) &&
          f.ok !== null &&
          (check.target === '' || (commandOf(f) ?? '').includes(check.target)),
      );
      const last = runs[runs.length - 1];
      if (!last)
        return {
          passed: false,
          detail: `no recorded run of ${check.target ? JSON.stringify(check.target) : 'any command'}`,
        };
      const code = exitCodeOf(last);
      if (!last.ok || (code !== null && code !== 0)) {
        return {
          passed: false,
          detail: `the last run of ${JSON.stringify(commandOf(last))} failed${code !== null ? ` with exit code ${code}` : ''} (${last.call_id})`,
        };
      }
      if (!matches(textOf(last.output), check))
        return {
          passed: false,
          detail: `the output of ${JSON.stringify(commandOf(last))} does not contain ${JSON.stringify(check.match)}`,
        };
      return { passed: true, detail: `${JSON.stringify(commandOf(last))} exited 0 (${last.call_id})` };
    }
    case 'file_exists': {
      if (check.target === '') return { passed: false, detail: 'file_exists needs a target path' };
      const known = lastKnownContent(facts, check.target);
      const observed = known && !known.stale ? null : look();
      if (observed) return judgeObserved(check, observed);
      if (known && known.content !== null) return { passed: true, detail: `${check.target} ${known.source}` };
      return {
        passed: false,
        detail: known
          ? `${check.target} was ${known.source}`
          : `nothing recorded shows ${check.target} exists`,
      };
    }
    case 'content_contains': {
      if (check.match === null) return { passed: false, detail: 'content_contains needs a match' };
      if (check.target === '') {
        return answer !== null && matches(answer, check)
          ? { passed: true, detail: `the answer contains ${JSON.stringify(check.match)}` }
          : { passed: false, detail: `the answer does not contain ${JSON.stringify(check.match)}` };
      }
      const known = lastKnownContent(facts, check.target);
      const observed = known && !known.stale ? null : look();
      if (observed) return judgeObserved(check, observed);
      if (!known || known.content === null)
        return { passed: false, detail: `no recorded content of ${check.target}` };
      return matches(known.content, check)
        ? {
            passed: true,
            detail: `${check.target} (${known.source}) contains ${JSON.stringify(check.match)}`,
          }
        : {
            passed: false,
            detail: `${check.target} (${known.source}) does not contain ${JSON.stringify(check.match)}`,
          };
    }
    case 'tool_fact': {
      const want = record(check.params.args);
      const candidates = facts.filter(
        (f) => f.ok === true && f.tool === check.target && argsInclude(f.args, want),
      );
      const path = typeof check.params.field === 'string' ? check.params.field : null;
      const hit = candidates.find((f) => {
        if (
          path !== null &&
          'equals' in check.params &&
          canonicalJson(field(f.output, path)) !== canonicalJson(check.params.equals)
        )
          return false;
        return matches(path !== null ? textOf(field(f.output, path)) : textOf(f.output), check);
      });
      if (hit) return { passed: true, detail: `${check.target} recorded the fact (${hit.call_id})` };
      return {
        passed: false,
        detail: candidates.length
          ? `no successful ${check.target} result matches`
          : `no successful ${check.target} call was recorded`,
      };
    }
  }
}

/**
 * Judge accept checks from what the log recorded: tool outcomes, the content
 * written or read, exit codes and the final answer. Nothing is re-run; tool
 * results claimed in model text are never facts (only TOOL_COMPLETED counts).
 * A file_exists / content_contains check the log does not settle (no recorded
 * write or read of the file, or a shell command ran after the last one) is
 * judged from the workspace view when there is one, and the result carries
 * what it saw (`observed`) so a replay decides the same without the disk.
 */
export function judgeAcceptance(
  checks: readonly AcceptCheck[],
  events: readonly RuntimeEvent[],
  answer: string | null = finalAnswer(events),
  workspace: WorkspaceView | null = null,
): AcceptanceDecision {
  return judgeFacts(checks, toolFacts(events), answer, workspace);
}

/** `judgeAcceptance` over tool facts already folded (the task's own fold, at its end). */
export function judgeFacts(
  checks: readonly AcceptCheck[],
  facts: readonly ToolFact[],
  answer: string | null,
  workspace: WorkspaceView | null = null,
  /** the task's todos: active ones are judged as a todos_done check even when none was asked for */
  todos: TodoState | null = null,
): AcceptanceDecision {
  const results: AcceptCheckResult[] = checks.map((check) => ({
    id: check.id,
    kind: check.kind,
    required: check.required,
    ...judge(check, facts, answer, workspace, todos ?? initialTodoState()),
  }));
  const implicit = todos && !checks.some((c) => c.kind === 'todos_done') ? judgeTodos(todos, null) : null;
  if (implicit) results.push(implicit);
  const failing = results.find((r) => r.required && !r.passed) ?? null;
  return { passed: failing === null, results, failing };
}

/** A check about what the task did (its tool calls, files, commands), not about its answer. */
export const isEvidenceCheck = (c: AcceptCheck): boolean =>
  c.kind === 'workspace_change' ||
  c.kind === 'command_success' ||
  c.kind === 'file_exists' ||
  c.kind === 'tool_fact' ||
  (c.kind === 'content_contains' && c.target !== '');

/**
 * The required checks about what the task did, when the log already shows every one of them
 * passing (judged from recorded tool facts alone, without looking at the workspace); null when
 * there are none or one does not pass yet. Only the answer is left to give then.
 */
export function evidenceRecorded(
  checks: readonly AcceptCheck[],
  facts: readonly ToolFact[],
): string[] | null {
  const evidence = checks.filter((c) => c.required && isEvidenceCheck(c));
  if (evidence.length === 0) return null;
  const { passed } = judgeFacts(evidence, facts, null);
  return passed ? evidence.map((c) => c.id) : null;
}

/**
 * The files a task's recorded write calls left in the allowed root (file_write, file_edit; a later
 * file_delete takes one out), as the tools were given their paths, in the order first written.
 * Files a shell command wrote are not known to the log and not listed.
 */
export function filesWritten(events: readonly RuntimeEvent[]): string[] {
  const files = new Map<string, string>();
  for (const f of toolFacts(events)) {
    if (f.ok !== true || !WRITE_TOOLS.includes(f.tool)) continue;
    const path = pathOf(f);
    if (path === null) continue;
    if (f.tool === 'file_delete') files.delete(normPath(path));
    else if (!files.has(normPath(path))) files.set(normPath(path), path);
  }
  return [...files.values()];
}
