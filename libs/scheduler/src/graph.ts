import { PlanStep } from '@runledger/contracts';

/** The first dependency cycle found, as step ids with the first repeated at the end (a -> b -> a), or null. */
export function findCycle(steps: readonly PlanStep[]): string[] | null {
  const deps = new Map(steps.map((s) => [s.id, s.depends_on]));
  const state = new Map<string, 'visiting' | 'done'>();
  const path: string[] = [];
  const visit = (id: string): string[] | null => {
    const seen = state.get(id);
    if (seen === 'done') return null;
    if (seen === 'visiting') return [...path.slice(path.indexOf(id)), id];
    state.set(id, 'visiting');
    path.push(id);
    for (const d of deps.get(id) ?? []) {
      const cycle = visit(d);
      if (cycle) return cycle;
    }
    path.pop();
    state.set(id, 'done');
    return null;
  };
  for (const s of steps) {
    const cycle = visit(s.id);
    if (cycle) return cycle;
  }
  return null;
}

export type StepStatus = 'pending' | 'running' | 'completed' | 'failed' | 'skipped';

/**
 * Steps that may start now: pending, every dependency completed, in plan order,
 * no more than `limit` running at once.
 */
export function readySteps(
  steps: readonly PlanStep[],
  status: ReadonlyMap<string, StepStatus>,
  limit: number,
): PlanStep[] {
  const running = steps.filter((s) => status.get(s.id) === 'running').length;
  const free = Math.max(0, limit - running);
  return steps
    .filter(
      (s) =>
        (status.get(s.id) ?? 'pending') === 'pending' &&
        s.depends_on.every((d) => status.get(d) === 'completed'),
    )
    .slice(0, free);
}

/** Steps that can never run because a dependency failed or was skipped (transitively). */
export function blockedSteps(
  steps: readonly PlanStep[],
  status: ReadonlyMap<string, StepStatus>,
): PlanStep[] {
  const dead = new Set(
    steps.filter((s) => ['failed', 'skipped'].includes(status.get(s.id) ?? '')).map((s) => s.id),
  );
  let grew = true;
  while (grew) {
    grew = false;
    for (const s of steps) {
      if (
        !dead.has(s.id) &&
        (status.get(s.id) ?? 'pending') === 'pending' &&
        s.depends_on.some((d) => dead.has(d))
      ) {
        dead.add(s.id);
        grew = true;
      }
    }
  }
  return steps.filter((s) => dead.has(s.id) && (status.get(s.id) ?? 'pending') === 'pending');
}
