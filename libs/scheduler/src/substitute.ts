const REF = /\$\{steps\.([A-Za-z0-9_-]+)\.output\}/g;
const WHOLE_REF = /^\$\{steps\.([A-Za-z0-9_-]+)\.output\}$/;

const asText = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v));

export class UnknownStepReferenceError extends Error {
  constructor(readonly stepId: string) {
    super(`reference to step ${stepId} whose output is not available`);
  }
}

/**
 * Replace `${steps.<id>.output}` in every string of `value`. A string that is
 * exactly one reference takes the output as is (keeping its JSON type); a
 * reference inside a longer string is replaced by the output as text.
 */
export function substituteOutputs<T>(value: T, outputs: ReadonlyMap<string, unknown>): T {
  const lookup = (id: string): unknown => {
    if (!outputs.has(id)) throw new UnknownStepReferenceError(id);
    return outputs.get(id);
  };
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') {
      const whole = WHOLE_REF.exec(v);
      if (whole) return lookup(whole[1]);
      return v.replace(REF, (_m, id: string) => asText(lookup(id)));
    }
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === 'object')
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]));
    return v;
  };
  return walk(value) as T;
}

/** Step ids a value refers to, so a plan can be checked before it runs. */
export function referencedSteps(value: unknown): string[] {
  const text = JSON.stringify(value) ?? '';
  return [...new Set([...text.matchAll(REF)].map((m) => m[1]))];
}
