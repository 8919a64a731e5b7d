import { ToolBudget, ToolManifest } from '@runledger/contracts';
import { CallProgress, TaskProgress } from '../log/progress';

/**
 * Per-tool budgets: how often one task may run a tool (`max_calls_per_task`), and whether a further
 * call runs only when the previous one found nothing (`only_if_previous_empty`, a search's budget).
 * A tool's manifest declares its budget; an agent profile's `tool_budgets` replaces it for that
 * agent's tasks. The manifests' budgets are recorded in TASK_RECEIVED (settings.tool_budgets) and
 * the profile with the task, so what a task may run is decided from its log alone: replay and fork
 * refuse the same calls, whatever the tools declare by then.
 */

/** Prefix of the error of a call refused for its tool's budget: the runtime refused it, the tool never ran. */
export const OVER_BUDGET = 'over_budget';

/** The budgets the manifests declare, by tool name (tools without one are left out). */
export function toolBudgetsOf(manifests: readonly ToolManifest[]): Record<string, ToolBudget> {
  const out: Record<string, ToolBudget> = {};
  for (const m of manifests) {
    const budget: ToolBudget = {
      ...(m.max_calls_per_task !== undefined ? { max_calls_per_task: m.max_calls_per_task } : {}),
      ...(m.only_if_previous_empty ? { only_if_previous_empty: true } : {}),
    };
    if (Object.keys(budget).length) out[m.name] = budget;
  }
  return out;
}

/** The budget `tool` runs under in this task, and where it comes from; null: none. */
export function budgetFor(
  p: Pick<TaskProgress, 'agent' | 'settings'>,
  tool: string,
): { budget: ToolBudget; source: string } | null {
  const own = p.agent?.tool_budgets?.[tool];
  if (own) return { budget: own, source: `agent ${p.agent!.name}'s profile` };
  const declared = p.settings?.tool_budgets?.[tool];
  return declared ? { budget: declared, source: 'its manifest' } : null;
}

/**
 * Whether a result found nothing: no output, blank text, an empty list, or an object whose every
 * field is empty (`{"hits": []}`). Numbers and booleans are something.
 */
export function isEmptyOutput(v: unknown): boolean {
  if (v === null || v === undefined) return true;
  if (typeof v === 'string') return v.trim() === '';
  if (Array.isArray(v)) return v.length === 0;
  if (typeof v === 'object') return Object.values(v).every(isEmptyOutput);
  return false;
}

/** A call found nothing when it failed or returned an empty output. */
const foundNothing = (c: CallProgress): boolean =>
  c.outcome === 'failed' || (c.outcome === 'completed' && (!c.result?.ok || isEmptyOutput(c.result.output)));

/**
 * Why `tool` may not run (again) in this task, or null when its budget allows it. `callId`: the call
 * being judged, which does not count against itself (a call resumed after a restart).
 */
export function spentBudget(p: TaskProgress, tool: string, callId?: string): string | null {
  const found = budgetFor(p, tool);
  if (!found) return null;
  const { budget, source } = found;
  // a call ran once its intent is recorded; a refused one never did
  const ran = [...p.calls.values()].filter((c) => c.tool === tool && c.attempt > 0 && c.call_id !== callId);
  const max = budget.max_calls_per_task;
  if (max !== undefined && ran.length >= max)
    return `${tool} may run at most ${max} ${max === 1 ? 'time' : 'times'} per task (${source}) and ran ${ran.length}: answer from what it returned`;
  const previous = ran[ran.length - 1];
  if (budget.only_if_previous_empty && previous && !foundNothing(previous))
    return previous.outcome === null
      ? `${tool} runs again only when its previous call found nothing (${source}), and ${previous.call_id} has not returned yet`
      : `${tool} runs again only when its previous call found nothing (${source}); ${previous.call_id} found something: answer from it`;
  return null;
}

/** The tools whose budget is spent are not offered: the model is not shown what it may not call. */
export const withinBudgets = (p: TaskProgress, tools: readonly ToolManifest[]): ToolManifest[] =>
  tools.filter((t) => spentBudget(p, t.name) === null);
