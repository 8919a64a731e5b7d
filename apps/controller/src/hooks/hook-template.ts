/** The `{{path}}` placeholders of a hook's templates, and the value paths they may name. */
export const PLACEHOLDER = /\{\{\s*([^{}\s]+)\s*\}\}/g;
const ROOTS = new Set(['body', 'headers', 'delivery_id', 'hook']);

/** The value paths a template names, in order. */
export function placeholdersOf(template: string): string[] {
  return [...template.matchAll(PLACEHOLDER)].map((m) => m[1]);
}

/** Why a value path names nothing a delivery has (null: it is fine). */
export function valuePathProblem(path: string): string | null {
  const [root, ...rest] = path.split('.');
  if (!ROOTS.has(root)) return 'must start with body, headers, delivery_id or hook';
  if (rest.some((s) => s.length === 0)) return 'has an empty segment';
  if ((root === 'delivery_id' || root === 'hook') && rest.length > 0) return `${root} has no fields`;
  if (root === 'headers' && rest.length > 1) return 'a header is headers.<name>';
  return null;
}
