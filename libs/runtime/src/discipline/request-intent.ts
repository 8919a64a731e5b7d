/**
 * Whether a request asks for a change (files, code, packages, the repository), read from its text
 * alone and conservatively: only a clause that starts with a change verb (after "please", "can you"
 * and the like) counts, a negated one ("do not write anything") never does, and verbs that also
 * name producing an answer ("write a summary", "create a list") count only with a workspace
 * object (a file, a path, code). What the task reads later never changes the verdict.
 */
export interface RequestIntent {
  mutation: boolean;
  /** the clause that decided, or why nothing did */
  reason: string;
}

/** Verbs that change something whatever follows them. */
const ALWAYS_CHANGE = [
  'delete',
  'remove',
  'rename',
  'move',
  'fix',
  'implement',
  'refactor',
  'install',
  'uninstall',
  'commit',
  'push',
  'edit',
  'modify',
  'patch',
  'overwrite',
  'mkdir',
  'touch',
  'scaffold',
  'migrate',
  'deploy',
  'build',
  'rewrite',
  'replace',
  'change',
  'chmod',
  'format',
];
/** Verbs that change something only when their object is in the workspace. */
const CHANGE_WITH_OBJECT = [
  'write',
  'create',
  'make',
  'add',
  'update',
  'generate',
  'save',
  'append',
  'put',
  'set up',
  'setup',
  'configure',
];
const THING =
  '(?:files?|director(?:y|ies)|folders?|repo(?:sitory)?|code|functions?|class(?:es)?|modules?|tests?|scripts?|packages?|dependenc(?:y|ies)|config(?:uration)?|branch(?:es)?|commits?|readme|changelog|project|components?|endpoints?|migrations?|[\\w./-]+\\.[a-z0-9]{1,8}\\b|/[\\w.-]+)';
/** the verb's own object is a workspace thing: "create the file x", "add tests", "update README.md" */
const DIRECT_OBJECT = new RegExp(
  `^\\s+(?:(?:a|an|the|new|this|that|my|our|some|empty)\\s+)*(?:[\\w-]+\\s+)?${THING}`,
  'i',
);
/** or it goes to one: "write a summary to notes.md" */
const TARGET =
  /\b(?:to|into|in|as|named|called|at|under)\s+(?:the\s+)?(?:(?:file|folder|directory)\s+)?(?:[\w./-]+\.[a-z0-9]{1,8}\b|\/[\w.-]+|[\w.-]+\/)/i;
const LEAD =
  /^(?:(?:please|pls|kindly|now|then|also|and|next|first|finally|can you|could you|would you|will you|i want you to|i need you to|go ahead and|let's|lets)\s+)*/i;
const NEGATION = /^(?:do not|don't|dont|never|no need to|without|avoid|not)\b/i;

const startsWith = (clause: string, verbs: readonly string[]): string | null =>
  verbs.find((v) => new RegExp(`^${v.replace(' ', '\\s+')}\\b`, 'i').test(clause)) ?? null;

export function classifyRequest(input: string): RequestIntent {
  const clauses = input
    .split(/[.!?](?=\s|$)|[;\n]|,|\b(?:and then|and|then|after that)\b/i)
    .map((c) => c.trim())
    .filter(Boolean);
  for (const raw of clauses) {
    const clause = raw.replace(LEAD, '').trim();
    if (NEGATION.test(clause)) continue;
    const always = startsWith(clause, ALWAYS_CHANGE);
    if (always) return { mutation: true, reason: `"${raw}" asks to ${always}` };
    const withObject = startsWith(clause, CHANGE_WITH_OBJECT);
    const rest = clause.slice(withObject?.length ?? 0);
    if (withObject && (DIRECT_OBJECT.test(rest) || TARGET.test(rest)))
      return { mutation: true, reason: `"${raw}" asks to ${withObject} in the workspace` };
  }
  return { mutation: false, reason: 'no clause of the request asks for a change' };
}
