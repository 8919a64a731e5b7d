import {
  McpServer,
  MissingRequiredClientCapabilityError,
  ProtocolError,
  ProtocolErrorCode,
  ResourceTemplate,
  type CallToolResult,
  type ReadResourceResult,
  type ServerContext,
} from '@modelcontextprotocol/server';
import { z } from 'zod';
import { IllegalStateError, NotFoundError, PermissionDecision, UserTask } from '@runledger/contracts';
import { EventStore } from '@runledger/event-store';
import { RuntimeController, TaskTree, TaskViews } from '@runledger/runtime';
import { requireScope } from '../auth/auth.guard';
import { Principal, Scope } from '../auth/scopes';
import { ProvideSecretBody, ResolvePermissionBody } from '../dtos/approvals.dto';
import { toTaskEventsResponse } from '../dtos/events.dto';
import { IdempotencyKey, ListTasksQuery, toTaskResponse } from '../dtos/tasks.dto';
import { IdParam } from '../dtos/zod.pipe';
import { toErrorResponse } from '../errors/error-body';
import { McpDetailedTask, TASKS_EXTENSION, answersOf, toMcpTask } from './mcp-task-mapping';

export interface RunledgerMcpDeps {
  runtime: RuntimeController;
  tasks: TaskViews;
  tree: TaskTree;
  store: EventStore;
  version: string;
}

/** Who asks and how: the request's principal, the origin links point at, and the protocol era it speaks. */
export interface McpRequestScope {
  principal: Principal;
  origin: string;
  era: 'legacy' | 'modern';
}

const TaskRef = { task_id: IdParam.describe('the task, as submit_task returned it') };
const RequestRef = {
  ...TaskRef,
  request_id: IdParam.describe("a pending request of the task (get_task's `pending`)"),
};
const TASK_LOG_URI = 'runledger://tasks/{task_id}/events';
/** events per read of a task log resource (get_events pages further) */
const RESOURCE_EVENTS = 1000;
/** the tools never change while the service runs: a client may keep the list this long */
const TOOLS_LIST_TTL_MS = 3_600_000;

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

/** The request's client declared the Tasks extension in its per-request capabilities. */
function speaksTasks(ctx: ServerContext): boolean {
  const envelope = (ctx.mcpReq.envelope ?? {}) as Record<string, unknown>;
  const capabilities = envelope['io.modelcontextprotocol/clientCapabilities'] as
    { extensions?: Record<string, unknown> } | undefined;
  return capabilities?.extensions?.[TASKS_EXTENSION] !== undefined;
}

/** A refusal of ours (401/403/404/409/400) as the protocol's error: invalid params, with our body as data. */
function protocolErrorOf(err: unknown): ProtocolError {
  if (err instanceof ProtocolError) return err;
  const { status, body } = toErrorResponse(err);
  return new ProtocolError(
    status >= 500 ? ProtocolErrorCode.InternalError : ProtocolErrorCode.InvalidParams,
    body.message,
    body,
  );
}

/**
 * Runledger as an MCP server for one request: the task API as tools, each checking the scope its
 * HTTP route needs and calling the same RuntimeController and TaskViews; task logs as resources
 * (`runledger://tasks/<task_id>/events`). To a 2026-07-28 client that declares the Tasks extension,
 * submit_task answers with an MCP task (our task id), and tasks/get, tasks/update and tasks/cancel
 * read and answer it from the log.
 */
export function createRunledgerMcpServer(scope: McpRequestScope, deps: RunledgerMcpDeps): McpServer {
  const { principal, origin } = scope;
  const server = new McpServer(
    { name: 'runledger', version: deps.version },
    {
      instructions:
        'Submit tasks to the Runledger runtime, follow them to their stop reason, answer their permission and secret requests.',
      // logging/setLevel is answered for 2025-11-25 clients (their hosts send it); no log notifications are sent
      capabilities: scope.era === 'modern' ? { extensions: { [TASKS_EXTENSION]: {} } } : { logging: {} },
      cacheHints: { 'tools/list': { ttlMs: TOOLS_LIST_TTL_MS, cacheScope: 'public' } },
    },
  );
  const scoped = (needed: Scope, work: () => Promise<object>) =>
    answer(async () => {
      requireScope(principal, needed);
      return work();
    });
  const requireTask = async (taskId: string) => {
    const task = await deps.tasks.get(taskId);
    if (!task) throw new NotFoundError(`task ${taskId} not found`, { task_id: taskId });
    return task;
  };
  const mcpTask = async (taskId: string) => {
    const task = await requireTask(taskId);
    return toMcpTask(task, [...task.pending, ...(await deps.tree.descendantsPending(taskId))], origin);
  };

  server.registerTool(
    'submit_task',
    {
      description:
        'Submit a task; it runs in the background. Follow it with get_task until its status is completed, failed or cancelled (scope tasks:write). A client of the Tasks extension gets an MCP task to poll with tasks/get.',
      inputSchema: z.object({
        ...UserTask.shape,
        idempotency_key: IdempotencyKey.describe('the same key and task return the same task'),
      }),
      annotations: {
        readOnlyHint: false,
        destructiveHint: false,
        idempotentHint: false,
        openWorldHint: true,
      },
    },
    async ({ idempotency_key, ...task }, ctx) => {
      let submitted: { task_id: string; status: string } | null = null;
      const result = await scoped('tasks:write', async () => {
        const { task_id, status } = await deps.runtime.submit(task, {
          idempotency_key: idempotency_key ?? null,
          source: 'api',
        });
        submitted = { task_id, status };
        return submitted;
      });
      if (!submitted || !speaksTasks(ctx)) return result;
      // the task is in the log before this answer, so a tasks/get for it resolves at once
      const {
        inputRequests: _none,
        result: _unset,
        ...created
      } = await mcpTask((submitted as { task_id: string }).task_id);
      return { resultType: 'task', ...created } as unknown as CallToolResult;
    },
  );

  server.registerTool(
    'get_task',
    {
      description:
        'A task: status, stop reason, result, pending permission or secret requests, usage (scope tasks:read).',
      inputSchema: z.object(TaskRef),
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    ({ task_id }) => scoped('tasks:read', async () => toTaskResponse(await requireTask(task_id))),
  );

  server.registerTool(
    'list_tasks',
    {
      description:
        'Tasks, newest first, filtered by status, session or text of the input; cursor paginated (scope tasks:read).',
      inputSchema: z.object({
        ...ListTasksQuery.shape,
        limit: z.number().int().min(1).max(500).default(50),
      }),
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
      inputSchema: z.object({
        ...TaskRef,
        after_seq: z.number().int().min(0).default(0),
        limit: z.number().int().min(1).max(1000).default(100),
      }),
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
      inputSchema: z.object(TaskRef),
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
      inputSchema: z.object({ ...RequestRef, ...ResolvePermissionBody.shape, decision: PermissionDecision }),
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
      inputSchema: z.object({ ...RequestRef, ...ProvideSecretBody.shape }),
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

  server.registerPrompt(
    'run_task',
    {
      title: 'Run a task on Runledger',
      description:
        'Hand a goal to the Runledger runtime and follow it to its end, answering what it asks on the way',
      argsSchema: z.object({ goal: z.string().min(1).describe('what the task should achieve') }),
    },
    ({ goal }) => ({
      messages: [
        {
          role: 'user',
          content: {
            type: 'text',
            text: `Submit this goal with submit_task: ${goal}\nThen call get_task until its status is completed, failed or cancelled. When it lists pending requests, ask me about each and answer it with resolve_permission or provide_secret. Report its result and stop reason.`,
          },
        },
      ],
    }),
  );

  if (scope.era === 'modern') registerTaskMethods(server, scope, deps, mcpTask);
  return server;
}

const TaskIdParams = z.object({ taskId: z.string().min(1) }).passthrough();
const UpdateParams = z.object({ taskId: z.string().min(1) }).passthrough();

/** tasks/get, tasks/update and tasks/cancel of the Tasks extension, for clients that declare it. */
function registerTaskMethods(
  server: McpServer,
  { principal }: McpRequestScope,
  deps: RunledgerMcpDeps,
  mcpTask: (taskId: string) => Promise<McpDetailedTask>,
): void {
  const guarded =
    <P>(needed: Scope, work: (params: P, ctx: ServerContext) => Promise<Record<string, unknown>>) =>
    async (params: P, ctx: ServerContext) => {
      if (!speaksTasks(ctx))
        throw new MissingRequiredClientCapabilityError({
          requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } },
        });
      try {
        requireScope(principal, needed);
        return { resultType: 'complete', ...(await work(params, ctx)) };
      } catch (err) {
        throw protocolErrorOf(err);
      }
    };
  server.server.setRequestHandler(
    'tasks/get',
    { params: TaskIdParams },
    guarded('tasks:read', async ({ taskId }: z.infer<typeof TaskIdParams>) => ({
      ...(await mcpTask(taskId)),
    })),
  );
  server.server.setRequestHandler(
    'tasks/update',
    { params: UpdateParams },
    guarded('approvals', async ({ taskId }: z.infer<typeof UpdateParams>, ctx) => {
      // the SDK lifts inputResponses out of the params, as it does for multi round-trip requests
      const inputResponses = ctx.mcpReq.inputResponses ?? {};
      const task = await deps.tasks.get(taskId);
      if (!task) throw new NotFoundError(`task ${taskId} not found`, { task_id: taskId });
      const pending = [...task.pending, ...(await deps.tree.descendantsPending(taskId))];
      for (const a of answersOf(inputResponses, pending))
        if (a.kind === 'permission')
          await deps.runtime.resolvePermission(a.task_id, a.request_id, a.decision, a.content);
      return {};
    }),
  );
  server.server.setRequestHandler(
    'tasks/cancel',
    { params: TaskIdParams },
    guarded('tasks:write', async ({ taskId }: z.infer<typeof TaskIdParams>) => {
      const task = await deps.tasks.get(taskId);
      if (!task) throw new NotFoundError(`task ${taskId} not found`, { task_id: taskId });
      // cancelling is cooperative: a task that ended meanwhile keeps its end, and the ack stands
      await deps.runtime.cancel(taskId).catch((err: unknown) => {
        if (!(err instanceof IllegalStateError)) throw err;
      });
      return {};
    }),
  );
}
