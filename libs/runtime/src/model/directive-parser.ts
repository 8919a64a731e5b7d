import { z } from 'zod';
import { ExecutionDirective } from '@runledger/contracts';
import { parsePlan } from '@runledger/scheduler';

export type DirectiveParse =
  | { ok: true; directive: ExecutionDirective }
  /** attempted: the text tried to be a directive (JSON or a fenced block); false for plain prose or nothing */
  | { ok: false; error: string; attempted: boolean };

/** The JSON text of a reply: the first fenced block, else the outermost braces. */
function jsonText(raw: string): { text: string; attempted: boolean } | null {
  const fenced = /```(?:json)?\s*\n?([\s\S]*?)```/i.exec(raw);
  if (fenced) return { text: fenced[1].trim(), attempted: true };
  const start = raw.indexOf('{');
  const end = raw.lastIndexOf('}');
  if (start === -1) return null;
  // A reply cut off before its closing brace still tried to be a directive.
  if (end <= start) return { text: raw.slice(start), attempted: true };
  return { text: raw.slice(start, end + 1), attempted: true };
}

/**
 * A model's reply -> a validated ExecutionDirective. A plan must also be a
 * well-formed plan (unique ids, known dependencies); a dependency cycle is not
 * a parse error but a plan failure, decided when the plan runs.
 */
export function parseDirective(raw: string | null | undefined): DirectiveParse {
  const found = jsonText(raw ?? '');
  if (!found) return { ok: false, error: 'no JSON directive found in the reply', attempted: false };
  let value: unknown;
  try {
    value = JSON.parse(found.text);
  } catch (e) {
    return { ok: false, error: `not valid JSON: ${(e as Error).message}`, attempted: true };
  }
  const parsed = ExecutionDirective.safeParse(value);
  if (!parsed.success) {
    return {
      ok: false,
      error: parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; '),
      attempted: true,
    };
  }
  if (parsed.data.type === 'plan') {
    const plan = parsePlan(parsed.data.steps);
    if (!plan.ok) return { ok: false, error: plan.error, attempted: true };
  }
  return { ok: true, directive: parsed.data };
}

/** A zod schema as the JSON schema a model server is sent: the input shape (defaults optional), no `$schema` tag. */
export function wireSchema(schema: z.ZodType): Record<string, unknown> {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io: 'input' });
  return rest;
}

/** The directive's JSON schema, sent as response_format (json protocol) to servers that do structured output. */
export const DIRECTIVE_RESPONSE_SCHEMA = {
  name: 'execution_directive',
  schema: wireSchema(ExecutionDirective),
};
