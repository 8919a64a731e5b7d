import Ajv from 'ajv';

/** What an MCP server asked the user for during a tool call (form mode). */
export interface ElicitationRequest {
  message: string;
  /** a flat JSON Schema object of primitive fields */
  requested_schema: Record<string, unknown>;
}

/** The person's answer, as the log holds it: the form's content, or a refusal. */
export type ElicitationAnswer =
  { action: 'accept'; content: Record<string, unknown> } | { action: 'decline' };

/**
 * A tool call stopped because its server asked for input the log does not hold yet: the runtime
 * records the request (a permission form or a secret), and when it is answered the call is issued
 * again, the server's same question then answered from the log. `index` is the question's place
 * among those the server asks during one call (1, 2, ...).
 */
export class ToolInputRequired extends Error {
  constructor(
    readonly index: number,
    readonly request: ElicitationRequest,
    /** the one field of a form that asks for a secret (then it is asked as a secret, never logged) */
    readonly secretField: string | null,
  ) {
    super(`the tool's server asks for input: ${request.message}`);
    this.name = new.target.name;
  }
}

const SECRET_NAME = /pass(word|phrase|code)?|secret|token|api[-_ ]?key|credential|private[-_ ]?key|\bpin\b/i;

/**
 * A form of exactly one string field whose name or title says it is a secret (a password, a token,
 * an API key) is asked as a secret: its value must never reach the log. Anything else is a form.
 */
export function secretFieldOf(schema: Record<string, unknown>): string | null {
  const properties = schema.properties;
  if (!properties || typeof properties !== 'object') return null;
  const entries = Object.entries(properties as Record<string, Record<string, unknown>>);
  if (entries.length !== 1) return null;
  const [name, field] = entries[0];
  if (field?.type !== 'string') return null;
  const words = [name, typeof field.title === 'string' ? field.title : ''].join(' ');
  return SECRET_NAME.test(words) || field.format === 'password' ? name : null;
}

const ajv = new Ajv({ allErrors: true, strict: false, validateFormats: false, useDefaults: true });

/**
 * The person's answer to a form, checked against the server's schema (required fields, types,
 * enums) with the schema's defaults filled in for fields left out; or what is wrong with it.
 */
export function checkElicitationContent(
  schema: Record<string, unknown>,
  content: Record<string, unknown>,
): { ok: true; content: Record<string, unknown> } | { ok: false; problem: string } {
  const { $schema: _draft, ...rest } = schema;
  let validate;
  try {
    validate = ajv.compile(rest);
  } catch (e) {
    return { ok: false, problem: `the server's form is not a valid JSON Schema: ${(e as Error).message}` };
  }
  const filled = structuredClone(content);
  if (validate(filled)) return { ok: true, content: filled };
  const problem = (validate.errors ?? [])
    .map((e) => `${e.instancePath || '(content)'} ${e.message ?? 'invalid'}`)
    .join('; ');
  return { ok: false, problem };
}
