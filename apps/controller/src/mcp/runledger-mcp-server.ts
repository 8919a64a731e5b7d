import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult, ReadResourceResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { NotFoundError, PermissionDecision, UserTask } from '@runledger/contracts';
import { EventStore } from '@runledger/event-store';
import { RuntimeController, TaskViews } from '@runledger/runtime';
import { requireScope } from '../auth/auth.guard';
import { Principal, Scope } from '../auth/scopes';
import { ProvideSecretBody, ResolvePermissionBody } from '../dtos/approvals.dto';
import { toTaskEventsResponse } from '../dtos/events.dto';
import { IdempotencyKey, ListTasksQuery, toTaskResponse } from '../dtos/tasks.dto';
import { IdParam } from '../dtos/zod.pipe';
import { toErrorResponse } from '../errors/error-body';

export interface RunledgerMcpDeps {
  runtime: RuntimeController;
  tasks: TaskViews;
  store: EventStore;
  version: string;
}

const TaskRef = { task_id: IdParam.describe('the task, as submit_task returned it') };
const RequestRef = {
  ...TaskRef,
  request_id: IdParam.describe("a pending request of the task (get_task's `pending`)"),
};
const TASK_LOG_URI = 'runledger://tasks/{task_id}/events';
/** events per read of a task log resource (get_events pages further) */
const RESOURCE_EVENTS = 1000;

/** A tool's answer: the JSON as text (for any client) and as structured content; errors as {error, message, details}. */
async function answer(work: () => Promise<object>): Promise<CallToolResult> {
  try {
    const result = await work();
    return {
      content: [{ type: 'text', text: JSON.stringify(result) }],
      structuredContent: result as Record<string, unknown>,
    };
  } catch (err) {
    const { body } = toErrorResponse(err);
    return { content: [{ type: 'text', text: JSON.stringify(body) }], isError: true };
  }
}

/**
 * Runledger as an MCP server for one request's principal: the task API as tools, each checking the
 * scope its HTTP route needs and calling the same RuntimeController and TaskViews; task logs as
 * resources (`runledger://tasks/<task_id>/events`).
 */
export function createRunledgerMcpServer(principal: Principal, deps: RunledgerMcpDeps): McpServer {
  const server = new McpServer(
    { name: 'runledger', version: deps.version },
    {
      instructions:
        'Submit tasks to the Runledger runtime, follow them to their stop reason, answer their permission and secret requests.',
    },
  );
  const scoped = (scope: Scope, work: () => Promise<object>) =>
    answer(async () => {
      requireScope(principal, scope);
      return work();
    });
  const requireTask = async (taskId: string) => {
    const task = await deps.tasks.get(taskId);
    if (!task) throw new NotFoundError(`task ${taskId} not found`, { task_id: taskId });
    return task;
  };

  server.registerTool(
    'submit_task',
    {
      description:
        'Submit a task; it runs in the background. Follow it with get_task until its status is completed, failed or cancelled (scope tasks:write).',
      inputSchema: {
        ...UserTask.shape,
        idempotency_key: IdempotencyKey.describe('the same key and task return the same task'),
      },
      annotations: {
        readOnlyHint: false,
        destructiveHint: false,
        idempotentHint: false,
        openWorldHint: true,
      },
    },
    ({ idempotency_key, ...task }) =>
      scoped('tasks:write', async () => {
        const { task_id, status } = await deps.runtime.submit(task, {
          idempotency_key: idempotency_key ?? null,
          source: 'api',
        });
        return { task_id, status };
      }),
  );

  server.registerTool(
    'get_task',
    {
      description:
        'A task: status, stop reason, result, pending permission or secret requests, usage (scope tasks:read).',
      inputSchema: TaskRef,
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    ({ task_id }) => scoped('tasks:read', async () => toTaskResponse(await requireTask(task_id))),
  );

  server.registerTool(
    'list_tasks',
    {
      description:
        'Tasks, newest first, filtered by status, session or text of the input; cursor paginated (scope tasks:read).',
      inputSchema: {
        ...ListTasksQuery.shape,
        limit: z.number().int().min(1).max(500).default(50),
      },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    (query) =>
      scoped('tasks:read', async () => {
        const page = await deps.tasks.list(query);
        return { tasks: page.tasks.map(toTaskResponse), next_cursor: page.next_cursor };
      }),
  );

  server.registerTool(
    'get_events',
    {
      description: "A page of a task's events by sequence, after after_seq (scope tasks:read).",
      inputSchema: {
        ...TaskRef,
        after_seq: z.number().int().min(0).default(0),
        limit: z.number().int().min(1).max(1000).default(100),
      },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    ({ task_id, after_seq, limit }) =>
      scoped('tasks:read', async () => {
        await requireTask(task_id);
        return toTaskEventsResponse(await deps.store.readStream(task_id, { after_seq, limit }), after_seq);
      }),
  );

  server.registerTool(
    'cancel_task',
    {
      description: 'Cancel a running or waiting task (scope tasks:write).',
      inputSchema: TaskRef,
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    ({ task_id }) =>
      scoped('tasks:write', async () => {
        await deps.runtime.cancel(task_id);
        return { task_id, status: (await requireTask(task_id)).status };
      }),
  );

  server.registerTool(
    'resolve_permission',
    {
      description:
        "Answer a task's pending permission request: allow_once, allow_always, deny or ask_always; an MCP server's form (rule mcp_elicitation) takes allow_once with its content, or deny (scope approvals).",
      inputSchema: { ...RequestRef, ...ResolvePermissionBody.shape, decision: PermissionDecision },
      annotations: {
        readOnlyHint: false,
        destructiveHint: false,
        idempotentHint: false,
        openWorldHint: false,
      },
    },
    ({ task_id, request_id, decision, content }) =>
      scoped('approvals', async () => {
        await deps.runtime.resolvePermission(task_id, request_id, decision, content);
        return { task_id, request_id, status: (await requireTask(task_id)).status };
      }),
  );

  server.registerTool(
    'provide_secret',
    {
      description:
        "Provide the secret a task's pending secret request asks for; never stored, logged or echoed (scope approvals).",
      inputSchema: { ...RequestRef, ...ProvideSecretBody.shape },
      annotations: {
        readOnlyHint: false,
        destructiveHint: false,
        idempotentHint: false,
        openWorldHint: false,
      },
    },
    ({ task_id, request_id, secret }) =>
      scoped('approvals', async () => {
        await deps.runtime.provideSecret(task_id, request_id, secret);
        return { task_id, request_id, status: (await requireTask(task_id)).status };
      }),
  );

  server.registerResource(
    'task-log',
    new ResourceTemplate(TASK_LOG_URI, {
      list: async () => {
        requireScope(principal, 'tasks:read');
        const page = await deps.tasks.list({ limit: 50 });
        return {
          resources: page.tasks.map((t) => ({
            uri: TASK_LOG_URI.replace('{task_id}', t.task_id),
            name: `${t.task_id}: ${t.input_first_line}`,
            mimeType: 'application/json',
          })),
        };
      },
    }),
    {
      title: 'Task log',
      description: `A task's events in order (the first ${RESOURCE_EVENTS}; get_events pages further) (scope tasks:read)`,
      mimeType: 'application/json',
    },
    async (uri, variables): Promise<ReadResourceResult> => {
      requireScope(principal, 'tasks:read');
      const taskId = IdParam.parse(String(variables.task_id));
      await requireTask(taskId);
      const events = await deps.store.readStream(taskId, { after_seq: 0, limit: RESOURCE_EVENTS });
      return {
        contents: [
          {
            uri: uri.href,
            mimeType: 'application/json',
            text: JSON.stringify(toTaskEventsResponse(events, 0)),
          },
        ],
      };
    },
  );
  return server;
}
