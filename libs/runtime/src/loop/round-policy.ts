import { MutationIntent, ToolManifest, ToolSurface } from '@runledger/contracts';
import { TaskProgress } from '../log/progress';
import { Stop } from '../ports';
import { classifyRequest } from '../discipline/request-intent';
import { isTodoTool } from '../discipline/todos';

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

/** Programs the inspection surface runs, read-only whatever their arguments (bar those refused below). */
const READ_PROGRAMS = [
  'ls',
  'cat',
  'head',
  'tail',
  'wc',
  'grep',
  'rg',
  'find',
  'pwd',
  'echo',
  'stat',
  'file',
  'du',
  'tree',
  'git',
];
const GIT_READS = ['status', 'log', 'diff', 'show', 'ls-files', 'rev-parse', 'blame', 'branch'];
const FIND_WRITES = /(^|\s)-(delete|exec|execdir|ok|okdir|fprint|fprintf|fls)\b/;

/**
 * A shell command the inspection surface allows: one read-only program, no redirection, pipe,
 * chaining or substitution (anything else needs the mutation surface).
 */
export function isReadOnlyCommand(command: string): boolean {
  if (/[<>|;&`$(){}\n\\]/.test(command)) return false;
  const words = command.trim().split(/\s+/);
  const program = words[0] ?? '';
  if (!READ_PROGRAMS.includes(program)) return false;
  if (program === 'git')
    return GIT_READS.includes(words[1] ?? '') && !(words[1] === 'branch' && words.length > 2);
  if (program === 'find') return !FIND_WRITES.test(command);
  return true;
}

export interface SurfaceDecision {
  surface: ToolSurface;
  reason: string;
  /** the tools the round is offered */
  tools: ToolManifest[];
}

/** The round's surface, from the task and its log; null when the round policy is off. */
export function decideSurface(p: TaskProgress, tools: readonly ToolManifest[]): SurfaceDecision | null {
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
