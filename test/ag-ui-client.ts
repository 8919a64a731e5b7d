import { HttpAgent } from '@ag-ui/client';
import type { BaseEvent } from '@ag-ui/core';
import { ApiHarness, TOKENS, parseSse } from './api-harness';

/** What the AG-UI e2e suites share: raw POSTs of a RunAgentInput and an HttpAgent with a bearer token. */

export interface SseEvent {
  id: string;
  type: string;
  event: BaseEvent & Record<string, unknown>;
}

/** POST /ag-ui with a raw body, read to the end: the events with their SSE ids (through `h.request`, so checked as it checks). */
export async function post(
  h: ApiHarness,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; events: SseEvent[]; text: string }> {
  const res = await h.request('POST', '/ag-ui', {
    token: TOKENS.writer,
    body,
    headers: { accept: 'text/event-stream', ...headers },
  });
  const events = res.headers.get('content-type')?.startsWith('text/event-stream')
    ? parseSse(res.text).map((m) => ({ id: m.id, type: m.event, event: JSON.parse(m.data) }))
    : [];
  return { status: res.status, events, text: res.text };
}

export const agentFor = (h: ApiHarness, threadId: string) =>
  new HttpAgent({ url: `${h.url}/ag-ui`, headers: { Authorization: `Bearer ${TOKENS.writer}` }, threadId });
