import { PERMISSION_DECISIONS, PermissionDecision } from '@runledger/contracts';
import type { PendingRequestView, TaskView } from '@runledger/runtime';
import { toTaskResponse } from '../dtos/tasks.dto';

/** The Tasks extension of MCP 2026-07-28 (SEP-2663). */
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';
/** how often a client is asked to poll tasks/get */
export const POLL_INTERVAL_MS = 1000;

export type McpTaskStatus = 'working' | 'input_required' | 'completed' | 'cancelled' | 'failed';

/** One server-to-client request of an `input_required` task (an `elicitation/create`). */
export interface McpInputRequest {
  method: 'elicitation/create';
  params: Record<string, unknown>;
}

/** What tasks/get answers: the extension's DetailedTask. */
export interface McpDetailedTask {
  taskId: string;
  status: McpTaskStatus;
  statusMessage: string;
  createdAt: string;
  lastUpdatedAt: string;
  /** the log keeps a task: no expiry */
  ttlMs: null;
  pollIntervalMs: number;
  inputRequests?: Record<string, McpInputRequest>;
  result?: Record<string, unknown>;
}

/** One answer of tasks/update, resolved to the call that records it. */
export type McpTaskAnswer =
  | {
      kind: 'permission';
      task_id: string;
      request_id: string;
      decision: PermissionDecision;
      content?: Record<string, unknown>;
    }
  | { kind: 'none'; key: string; why: string };

/** The key of a pending request in `inputRequests`: unique over the task's life, since request ids are unique per task. */
export const inputRequestKey = (p: Pick<PendingRequestView, 'task_id' | 'request_id'>): string =>
  `${p.task_id}/${p.request_id}`;

/** An MCP server's own form waiting for a person (rule mcp_elicitation): its message and schema are the request's arguments. */
function serverForm(
  p: PendingRequestView,
): { message: string; requested_schema: Record<string, unknown> } | null {
  const args = p.args ?? {};
  return typeof args.message === 'string' &&
    typeof args.requested_schema === 'object' &&
    args.requested_schema
    ? { message: args.message, requested_schema: args.requested_schema as Record<string, unknown> }
    : null;
}

/**
 * A pending request as the client sees it: a permission as a form asking for the decision (an MCP
 * server's form as that form), a secret as a URL-mode elicitation pointing at the secret endpoint,
 * so the value travels over HTTPS to us and never through the protocol or the client's model.
 */
export function toInputRequest(p: PendingRequestView, origin: string): McpInputRequest {
  if (p.kind === 'secret')
    return {
      method: 'elicitation/create',
      params: {
        mode: 'url',
        elicitationId: inputRequestKey(p),
        url: `${origin}/tasks/${p.task_id}/secrets/${p.request_id}`,
        message:
          `The tool ${p.tool} needs the secret ${p.secret_name ?? ''}: POST {"secret": "..."} to this URL with a bearer token that holds the approvals scope. ${p.reason}`.trim(),
      },
    };
  const form = serverForm(p);
  if (form)
    return {
      method: 'elicitation/create',
      params: { mode: 'form', message: form.message, requestedSchema: form.requested_schema },
    };
  return {
    method: 'elicitation/create',
    params: {
      mode: 'form',
      message: `Allow ${p.tool} with ${JSON.stringify(p.args ?? {})}? ${p.reason}`.trim(),
      requestedSchema: {
        type: 'object',
        properties: {
          decision: {
            type: 'string',
            enum: [...PERMISSION_DECISIONS],
            description: p.covers
              ? `allow_always covers ${p.covers}`
              : 'allow_always covers this tool from now on',
          },
        },
        required: ['decision'],
      },
    },
  };
}

/** The requests an MCP client can answer: an AG-UI frontend's tool calls are that frontend's to answer. */
const answerable = (pending: readonly PendingRequestView[]): PendingRequestView[] =>
  pending.filter((p) => p.kind !== 'client_tool');

/** Our status in the extension's words: anything waiting for a person (here or in a delegated task) is input_required. */
export function mcpStatusOf(view: TaskView, all: readonly PendingRequestView[]): McpTaskStatus {
  const pending = answerable(all);
  switch (view.status) {
    case 'completed':
    case 'failed':
      // a task that failed ran to its stop reason: a tool result (isError), not a JSON-RPC error
      return 'completed';
    case 'cancelled':
      return 'cancelled';
    default:
      return pending.length > 0 ? 'input_required' : 'working';
  }
}

/** A task of ours as an MCP task, with its pending requests (its own and its delegated tasks') and its result. */
export function toMcpTask(
  view: TaskView,
  all: readonly PendingRequestView[],
  origin: string,
): McpDetailedTask {
  const pending = answerable(all);
  const status = mcpStatusOf(view, pending);
  const base = {
    taskId: view.task_id,
    status,
    createdAt: view.created_at,
    lastUpdatedAt: view.updated_at,
    ttlMs: null,
    pollIntervalMs: POLL_INTERVAL_MS,
  } as const;
  if (status === 'input_required')
    return {
      ...base,
      statusMessage: `waiting for ${pending.length} answer(s): ${pending.map((p) => `${p.kind} for ${p.tool}`).join(', ')}`,
      inputRequests: Object.fromEntries(pending.map((p) => [inputRequestKey(p), toInputRequest(p, origin)])),
    };
  if (status === 'completed') {
    const response = toTaskResponse({ ...view, pending: [...pending] });
    return {
      ...base,
      statusMessage: `${view.stop_reason ?? view.status}${view.stop_detail ? `: ${view.stop_detail}` : ''}`,
      result: {
        content: [{ type: 'text', text: view.result ?? view.stop_detail ?? view.status }],
        structuredContent: response,
        isError: view.status === 'failed',
      },
    };
  }
  return { ...base, statusMessage: view.status };
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The answers in a tasks/update, each matched to an outstanding request by key. An accepted form
 * decides (a permission form its `decision`, an MCP server's form allow_once with what was filled
 * in), a declined one denies; a cancelled one, a key not outstanding, or a secret (whose value
 * goes to the secret endpoint, not here) records nothing.
 */
export function answersOf(
  inputResponses: Record<string, unknown>,
  pending: readonly PendingRequestView[],
): McpTaskAnswer[] {
  const byKey = new Map(answerable(pending).map((p) => [inputRequestKey(p), p]));
  return Object.entries(inputResponses).map(([key, response]): McpTaskAnswer => {
    const p = byKey.get(key);
    if (!p) return { kind: 'none', key, why: 'not an outstanding request of this task' };
    if (p.kind === 'secret')
      return { kind: 'none', key, why: 'a secret is provided at its URL, not through the protocol' };
    const action = isRecord(response) ? response.action : undefined;
    const ids = { task_id: p.task_id, request_id: p.request_id };
    if (action === 'decline') return { kind: 'permission', ...ids, decision: 'deny' };
    if (action !== 'accept') return { kind: 'none', key, why: `action ${String(action)} decides nothing` };
    const content = isRecord(response) && isRecord(response.content) ? response.content : {};
    if (serverForm(p)) return { kind: 'permission', ...ids, decision: 'allow_once', content };
    const decision = PermissionDecision.safeParse(content.decision);
    return decision.success
      ? { kind: 'permission', ...ids, decision: decision.data }
      : { kind: 'none', key, why: `decision must be one of ${PERMISSION_DECISIONS.join(', ')}` };
  });
}
