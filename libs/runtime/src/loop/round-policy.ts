import { MutationIntent, ToolManifest, ToolSurface } from '@runledger/contracts';
import { isReadOnlyCommand } from '@runledger/permissions';
import { TaskProgress, resultText } from '../log/progress';
import { Stop } from '../ports';
import { classifyRequest } from '../discipline/request-intent';
import { isTodoTool } from '../discipline/todos';
import { READ_TOOLS, commandOf, evidenceRecorded, pathOf, samePath } from '../discipline/accept-gate';
import { RoundFactsFold, ToolFact } from '../discipline/round-facts';
import { OVER_BUDGET } from './tool-budgets';

/**
 * The round policy: the runtime, not the model, decides what each round may do. A task may change
 * things only when its request asks for a change (classified conservatively from its input) or a
 * person allowed it; otherwise mutating tools are never offered and a call to one is refused before
 * it runs. Everything it decides is recorded (TASK_RECEIVED.mutation_intent, CONTEXT_BUILT.tool_surface),
 * so replay and fork see the same surfaces; text a tool returned never changes them.
 */
export const isRoundPolicyOn = (p: Pick<TaskProgress, 'settings'>): boolean =>
  p.settings?.round_policy === 'on';

/** Built-in tools that only read; any other tool counts as reading only when its manifest says `read_only`. */
export const READ_ONLY_BUILT_INS = ['file_read', 'memory_search', 'memory_list'];
export const SHELL_TOOL = 'shell_exec';

export const isReadOnlyTool = (m: Pick<ToolManifest, 'name' | 'read_only'>): boolean =>
  m.read_only === true || READ_ONLY_BUILT_INS.includes(m.name);

/** Whether a task may change things: a person's allow_mutation decides, else the request's own words. */
export function mutationIntentOf(input: string, allowMutation: boolean | undefined): MutationIntent {
  if (allowMutation === true)
    return {
      allowed: true,
      reason: 'a person allowed changes for this task (allow_mutation)',
      decided_by: 'person',
    };
  const intent = classifyRequest(input);
  return { allowed: intent.mutation, reason: intent.reason, decided_by: 'classifier' };
}

export interface SurfaceDecision {
  surface: ToolSurface;
  reason: string;
  /** the tools the round is offered */
  tools: ToolManifest[];
}

/**
 * The round's surface, from the task and its log (`facts`: its tool calls as recorded); null when
 * the round policy is off.
 */
export function decideSurface(
  p: TaskProgress,
  tools: readonly ToolManifest[],
  facts: RoundFactsFold,
): SurfaceDecision | null {
  if (!isRoundPolicyOn(p)) return null;
  // nothing runs in an answer_only round, so until the model answers the answer stays due
  if (p.surface?.surface === 'answer_only')
    return { surface: 'answer_only', reason: p.surface.reason, tools: [] };
  const last = [...p.plans.values()].pop();
  if (last && last.round === p.round && last.outcome === 'completed' && p.roundClosed)
    return {
      surface: 'answer_only',
      reason: `plan ${last.plan_id} completed: the next round writes the answer`,
      tools: [],
    };
  // once the log shows what the accept checks ask for, further tool calls add nothing: the answer is due
  const evidence = p.round > 0 && p.roundClosed ? evidenceRecorded(p.accept_checks, facts.facts()) : null;
  if (evidence)
    return {
      surface: 'answer_only',
      reason: `the evidence the accept checks need is recorded (${evidence.join(', ')}): the next round writes the answer`,
      tools: [],
    };
  if (p.mutationIntent?.allowed)
    return { surface: 'mutation', reason: `changes allowed: ${p.mutationIntent.reason}`, tools: [...tools] };
  const why = `no change asked for: ${p.mutationIntent?.reason ?? 'no intent recorded'}`;
  const reads = tools.filter(isReadOnlyTool);
  const shell = tools.find((t) => t.name === SHELL_TOOL);
  if (shell)
    return { surface: 'inspection', reason: `${why}; read-only commands only`, tools: [...reads, shell] };
  return { surface: 'retrieval', reason: why, tools: reads };
}

/** Prefix of a refused call's error: the runtime, not the tool, refused it. */
export const NOT_OFFERED = 'not_offered';

/**
 * Why a call is outside its round's surface, or null when it is inside (the todo tool always is:
 * it changes nothing but the log).
 */
export function surfaceRefusal(
  surface: NonNullable<TaskProgress['surface']>,
  tool: string,
  args: Record<string, unknown>,
): string | null {
  if (isTodoTool(tool)) return null;
  if (surface.surface === 'answer_only')
    return `${NOT_OFFERED}: this round is answer_only (${surface.reason}); answer from what was read, without tools`;
  if (!surface.tools.includes(tool))
    return `${NOT_OFFERED}: ${tool} is not offered in this round (surface ${surface.surface}: ${surface.reason})`;
  if (surface.surface === 'inspection' && tool === SHELL_TOOL) {
    const command = typeof args.command === 'string' ? args.command : '';
    if (!isReadOnlyCommand(command))
      return `${NOT_OFFERED}: ${JSON.stringify(command)} is not a read-only command (surface inspection: ${surface.reason})`;
  }
  return null;
}

/**
 * The visible answer the runtime writes itself when the outcome follows from recorded facts, so
 * the model cannot claim something happened that did not; null: the model's answer stands.
 */
export function runtimeAnswer(p: TaskProgress, stop: Stop): string | null {
  if (stop.stop_reason !== 'mutation_refused') return null;
  const refused = [
    ...new Set(
      [...p.calls.values()]
        .filter((c) => c.outcome === 'failed' && (c.error ?? '').startsWith(NOT_OFFERED))
        .map((c) => c.tool),
    ),
  ];
  const tools = `${refused.join(', ')} ${refused.length === 1 ? 'was' : 'were'} refused before running`;
  if (p.mutationIntent && !p.mutationIntent.allowed)
    return `Nothing was changed. The request did not ask for a change (${p.mutationIntent.reason}), so ${tools}. To allow changes, submit the task again with allow_mutation: true (CLI: --write).`;
  return `No answer was given: the answer was due (${p.surface?.reason ?? 'answer_only'}) and ${tools}. Everything that ran is in the task's log.`;
}

/**
 * The files a request names: words with a file extension or a folder in them (`notes.txt`,
 * `src/app.ts`, `./README.md`), quoted or not; not URLs or version numbers.
 */
export function namedFiles(input: string): string[] {
  const words = input
    .split(/[\s`'"(),;]+/)
    .map((w) => w.replace(/[.:!?]+$/, ''))
    .filter((w) => /^[\w~./-]+$/.test(w) && !/^[\d.]+$/.test(w) && !/^\.+$/.test(w))
    .filter((w) => w.includes('/') || /[\w-]\.[A-Za-z0-9]{1,10}$/.test(w));
  return [...new Set(words)];
}

/**
 * The commands a request asks to see, when they only read: each `quoted` command in it, or the
 * whole request when it is one such command line (`git log -3`).
 */
export function requestedCommands(input: string): string[] {
  const quoted = [...input.matchAll(/`([^`\n]+)`/g)].map((m) => m[1].trim());
  const asked = quoted.length ? quoted : input.includes('\n') ? [] : [input.trim()];
  return [...new Set(asked.filter((c) => c !== '' && isReadOnlyCommand(c)))];
}

/** A refusal by the runtime itself (the surface, a budget): the tool never ran, so it failed nothing. */
const refusedByRuntime = (f: ToolFact): boolean =>
  (f.error ?? '').startsWith(NOT_OFFERED) || (f.error ?? '').startsWith(OVER_BUDGET);

const ranClean = (f: ToolFact): boolean => {
  const code = (f.output as { exit_code?: unknown } | null)?.exit_code;
  return f.ok === true && (code === undefined || code === 0);
};

/** What the runtime ends a task with when the outcome of its last round follows from recorded facts. */
export interface DeterministicEnd {
  stop: Stop;
  /** the visible answer, written from the facts */
  answer: string;
}

/**
 * After a round of a task that asked for no change, the outcomes the runtime answers itself,
 * without another model call, so the model cannot claim what did not happen:
 * - a read of a file the request names failed: the task fails (tool_error) saying which and why;
 * - the round ran every command the request asked to see (read-only, `quoted` or the whole
 *   request), each successfully: the task completes with their output.
 * Null: the model goes on.
 */
export function deterministicEnd(p: TaskProgress, facts: RoundFactsFold): DeterministicEnd | null {
  if (!isRoundPolicyOn(p) || p.mutationIntent?.allowed !== false || p.round === 0 || !p.roundClosed)
    return null;
  const round = facts.rounds.filter((r) => r.round === p.round).pop();
  const calls = (round?.tools ?? []).filter((f) => f.ok !== null && !refusedByRuntime(f));
  if (calls.length === 0) return null;
  const named = namedFiles(p.input);
  const failedReads = calls.filter((f) => {
    const path = pathOf(f);
    return (
      READ_TOOLS.includes(f.tool) && f.ok === false && path !== null && named.some((n) => samePath(path, n))
    );
  });
  if (failedReads.length > 0) {
    const lines = failedReads.map((f) => `${pathOf(f)} could not be read: ${f.error ?? 'the read failed'}`);
    return {
      stop: {
        stop_reason: 'tool_error',
        detail: `the request names ${failedReads.map(pathOf).join(', ')}, which could not be read`,
      },
      answer: `${lines.join('\n')}\nSo there is no answer from ${failedReads.length === 1 ? 'it' : 'them'}. Nothing was changed.`,
    };
  }
  const asked = requestedCommands(p.input);
  if (asked.length === 0) return null;
  const runs = asked.map((command) =>
    calls.filter((f) => f.tool === SHELL_TOOL && commandOf(f)?.trim() === command && ranClean(f)).pop(),
  );
  if (runs.some((f) => f === undefined)) return null;
  return {
    stop: {
      stop_reason: 'completed',
      detail: `the round ran ${asked.map((c) => `\`${c}\``).join(', ')} as asked`,
    },
    answer: runs
      .map((f, i) => `\`${asked[i]}\`:\n\`\`\`\n${resultText(f!.output).trimEnd()}\n\`\`\``)
      .join('\n\n'),
  };
}
