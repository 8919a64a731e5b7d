import { RunAgentInputSchema } from '@ag-ui/core/schemas';
import type { Message, RunAgentInput } from '@ag-ui/core';
import { contentToText } from '@ag-ui/core';
import { z } from 'zod';
import { CLIENT_TOOL_NAME, ClientTool, ValidationError } from '@runledger/contracts';
import { clientSchemaProblem } from '@runledger/runtime';

/** The body of POST /ag-ui: AG-UI's RunAgentInput, as @ag-ui/core validates it. */
export const RunAgentInputBody = RunAgentInputSchema as unknown as z.ZodType<RunAgentInput>;

/** The Last-Event-ID a reconnecting client sends: an AG-UI event id of ours, `<sequence>-<n>`. */
export const AgUiLastEventId = z
  .string()
  .regex(/^\d{1,15}-\d{1,6}$/, 'must be an event id of this stream (<sequence>-<n>)')
  .optional();

/**
 * The conversation's last user message and its text: what the task is asked (null when there is
 * none, or it has no text).
 */
export function lastUserMessage(
  messages: readonly Message[],
): { message: Extract<Message, { role: 'user' }>; text: string } | null {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m.role !== 'user') continue;
    const text = contentToText(m.content).trim();
    return text === '' ? null : { message: m, text };
  }
  return null;
}

/** The idempotency key of a run: a runId sent again (a retry, a reconnect) names the task it started. */
export const runIdempotencyKey = (threadId: string, runId: string): string => `ag-ui:${threadId}:${runId}`;

/**
 * The payload of a resume entry that answers a frontend tool's call: its result (any JSON value),
 * or `error` when it failed.
 */
export const ClientToolResultBody = z.union([
  z
    .object({ result: z.unknown() })
    .strict()
    .refine((b) => 'result' in b, { message: 'result is required' }),
  z.object({ error: z.string().min(1).max(10_000) }).strict(),
]);

/** The runtime's own functions, offered to the model beside the tools. */
const RESERVED_PREFIX = 'runledger_';

/**
 * The tools a frontend offers must be offerable to a model beside ours: a function name, unique,
 * none of ours, and a parameters schema that can check arguments. 400 otherwise, nothing written.
 */
export function checkOfferedTools(tools: readonly ClientTool[], ours: readonly string[]): void {
  const fail = (index: number, problem: string): never => {
    throw new ValidationError(`invalid body: tools[${index}]: ${problem}`, { field: `tools.${index}` });
  };
  const seen = new Set<string>();
  tools.forEach((t, i) => {
    if (!CLIENT_TOOL_NAME.test(t.name))
      fail(i, `name ${JSON.stringify(t.name)} must be 1-64 letters, digits, _ or -`);
    if (t.name.startsWith(RESERVED_PREFIX))
      fail(i, `names starting with ${RESERVED_PREFIX} are the runtime's`);
    if (ours.includes(t.name))
      fail(i, `${t.name} is a tool of this server; name the frontend's tool otherwise`);
    if (seen.has(t.name)) fail(i, `${t.name} is offered twice`);
    seen.add(t.name);
    if (
      t.parameters !== undefined &&
      (typeof t.parameters !== 'object' || t.parameters === null || Array.isArray(t.parameters))
    )
      fail(i, 'parameters must be a JSON Schema object');
    const problem = clientSchemaProblem(t);
    if (problem) fail(i, `parameters is not a usable JSON Schema: ${problem}`);
  });
}
