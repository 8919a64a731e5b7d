import { RunAgentInputSchema } from '@ag-ui/core/schemas';
import type { Message, RunAgentInput } from '@ag-ui/core';
import { contentToText } from '@ag-ui/core';
import { z } from 'zod';

/** The body of POST /ag-ui: AG-UI's RunAgentInput, as @ag-ui/core validates it. */
export const RunAgentInputBody = RunAgentInputSchema as unknown as z.ZodType<RunAgentInput>;

/** The Last-Event-ID a reconnecting client sends: an AG-UI event id of ours, `<sequence>-<n>`. */
export const AgUiLastEventId = z
  .string()
  .regex(/^\d{1,15}-\d{1,6}$/, 'must be an event id of this stream (<sequence>-<n>)')
  .optional();

/** The text of the conversation's last user message: what the task is asked (null when there is none). */
export function lastUserText(messages: readonly Message[]): string | null {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m.role !== 'user') continue;
    const text = contentToText(m.content).trim();
    return text === '' ? null : text;
  }
  return null;
}

/** The idempotency key of a run: a runId sent again (a retry, a reconnect) names the task it started. */
export const runIdempotencyKey = (threadId: string, runId: string): string => `ag-ui:${threadId}:${runId}`;
