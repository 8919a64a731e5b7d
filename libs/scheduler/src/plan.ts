import { z } from 'zod';
import { PlanStep } from '@runledger/contracts';
import { referencedSteps } from './substitute';

const PlanSteps = z.array(PlanStep).min(1).max(50);

export type PlanParse = { ok: true; steps: PlanStep[] } | { ok: false; error: string };

/** Plan JSON (a steps array, or an object holding one) -> validated PlanStep[]; never throws. */
export function parsePlan(input: unknown): PlanParse {
  let value = input;
  if (typeof value === 'string') {
    try {
      value = JSON.parse(value);
    } catch (e) {
      return { ok: false, error: `plan is not valid JSON: ${(e as Error).message}` };
    }
  }
  if (value && typeof value === 'object' && !Array.isArray(value) && 'steps' in value)
    value = (value as { steps: unknown }).steps;
  const parsed = PlanSteps.safeParse(value);
  if (!parsed.success) {
    return {
      ok: false,
      error: parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; '),
    };
  }
  const ids = new Set<string>();
  for (const step of parsed.data) {
    if (ids.has(step.id)) return { ok: false, error: `duplicate step id ${step.id}` };
    ids.add(step.id);
  }
  for (const step of parsed.data) {
    const missing = step.depends_on.find((d) => !ids.has(d));
    if (missing) return { ok: false, error: `step ${step.id} depends on unknown step ${missing}` };
    if (step.kind === 'tool' && !step.tool)
      return { ok: false, error: `step ${step.id} is a tool step without a tool` };
  }
  const deps = new Map(parsed.data.map((s) => [s.id, s.depends_on]));
  const ancestors = (id: string, seen = new Set<string>()): Set<string> => {
    for (const d of deps.get(id) ?? []) if (!seen.has(d)) ancestors(d, seen.add(d));
    return seen;
  };
  for (const step of parsed.data) {
    const before = ancestors(step.id);
    const unordered = referencedSteps(step.args).find((ref) => !before.has(ref));
    if (unordered)
      return { ok: false, error: `step ${step.id} uses the output of ${unordered} without depending on it` };
  }
  return { ok: true, steps: parsed.data };
}
