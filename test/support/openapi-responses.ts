import Ajv2020 from 'ajv/dist/2020';
import type { ValidateFunction } from 'ajv';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export interface ResponseMismatch {
  request: string;
  status: number;
  problem: string;
}

const DOC_ID = 'openapi.json';
/**
 * Served beside the REST API, not part of it: the document itself and its viewer,
 * the protocols each described by its own specification (A2A with its agent card,
 * MCP, OAuth protected-resource metadata), and the dashboard's page and files.
 */
const NOT_REST = /^(\/docs|\/a2a|\/mcp|\/\.well-known)(\/|$)|^\/admin(\/static\/[^/]+)?\/?$/;
/**
 * Answers the document's description gives every path: 400 for a request line
 * or path that cannot be read (bad percent-encoding), 404 for a path no route
 * has, 405 for a method a path lacks, 431 for headers Node refuses before any
 * route sees them; each with the error body.
 */
const ANY_PATH = new Set([400, 404, 405, 431]);
const pointer = (...parts: string[]): string =>
  parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/');

/**
 * Checks HTTP responses against an OpenAPI 3.1 document: the operation the
 * request reached (by method and path template, literal segments before
 * parameters), a response documented for its status, and a JSON body that
 * its schema accepts. The schemas are JSON Schema 2020-12, checked by ajv.
 */
export class OpenApiResponses {
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
  private readonly compiled = new Map<string, ValidateFunction>();
  private readonly templates: { method: string; template: string; pattern: RegExp; literals: number }[];

  constructor(private readonly doc: Json) {
    this.ajv.addSchema({ ...doc, $id: DOC_ID });
    this.templates = Object.entries(doc.paths as Json).flatMap(([template, ops]) =>
      Object.keys(ops as Json).map((method) => ({
        method,
        template,
        pattern: new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`),
        literals: template.split('/').filter((s) => s && !s.startsWith('{')).length,
      })),
    );
  }

  /** What is wrong with this response by the document, or null when it conforms. */
  check(
    method: string,
    path: string,
    status: number,
    contentType: string | null,
    body: unknown,
  ): string | null {
    const bare = path.split('?')[0];
    if (NOT_REST.test(bare)) return null;
    const op = this.templates
      .filter((t) => t.method === method.toLowerCase() && t.pattern.test(bare))
      .sort((a, b) => b.literals - a.literals)[0];
    const responses = op ? ((this.doc.paths as Json)[op.template][op.method].responses as Json) : {};
    const key = String(status) in responses ? String(status) : 'default' in responses ? 'default' : null;
    if (!key && !ANY_PATH.has(status))
      return op
        ? `status ${status} not documented for ${op.method.toUpperCase()} ${op.template}`
        : 'no documented operation';
    if (!contentType?.includes('application/json')) return null;
    const ref = key
      ? `${DOC_ID}#/${pointer('paths', op!.template, op!.method, 'responses', key, 'content', 'application/json', 'schema')}`
      : `${DOC_ID}#/components/schemas/ErrorResponseDto`;
    if (key && !responses[key].content?.['application/json']?.schema) return null;
    let validate = this.compiled.get(ref);
    if (!validate) {
      validate = this.ajv.compile({ $ref: ref });
      this.compiled.set(ref, validate);
    }
    if (validate(body)) return null;
    return (validate.errors ?? [])
      .slice(0, 5)
      .map((e) => `${e.instancePath || '(body)'} ${e.message}`)
      .join('; ');
  }
}
