import { z } from 'zod';
import { Scope } from '../auth/scopes';
import {
  CancelBody,
  CancelResponse,
  ProvideSecretBody,
  ResolutionResponse,
  ResolvePermissionBody,
} from '../dtos/approvals.dto';
import { ErrorResponse } from '../dtos/error.dto';
import {
  AdminEventsQuery,
  AdminEventsResponse,
  TaskEventsQuery,
  TaskEventsResponse,
} from '../dtos/events.dto';
import {
  CreateTaskBody,
  ListTasksQuery,
  SubmitResponse,
  TaskListResponse,
  TaskResponse,
} from '../dtos/tasks.dto';
import { StreamQuery } from '../tasks/task-stream.controller';
import { WsClientMessage } from '../dtos/ws.dto';
import { MemoryDeleteResponse, MemoryListResponse, MemoryQuery } from '../memory/memory.dto';
import { RuntimeEventEnvelope } from '@runledger/contracts';

interface Operation {
  method: 'get' | 'post' | 'delete';
  path: string;
  summary: string;
  scope: Scope | null;
  query?: z.ZodObject;
  body?: z.ZodType;
  headers?: Array<{ name: string; description: string }>;
  status: number;
  response?: z.ZodType;
  contentType?: string;
}

const taskId = { name: 'task_id', in: 'path', required: true, schema: { type: 'string' } };
const requestId = { name: 'request_id', in: 'path', required: true, schema: { type: 'string' } };
const entryId = { name: 'id', in: 'path', required: true, schema: { type: 'string' } };

const OPERATIONS: Operation[] = [
  {
    method: 'post',
    path: '/tasks',
    summary: 'Submit a task; it runs in the background',
    scope: 'tasks:write',
    body: CreateTaskBody,
    status: 202,
    response: SubmitResponse,
    headers: [
      {
        name: 'Idempotency-Key',
        description: 'same key and body returns the same task; same key, different body is 409',
      },
    ],
  },
  {
    method: 'get',
    path: '/tasks',
    summary: 'List tasks, newest first, cursor paginated',
    scope: 'tasks:read',
    query: ListTasksQuery,
    status: 200,
    response: TaskListResponse,
  },
  {
    method: 'get',
    path: '/tasks/{task_id}',
    summary: 'Task state',
    scope: 'tasks:read',
    status: 200,
    response: TaskResponse,
  },
  {
    method: 'get',
    path: '/tasks/{task_id}/events',
    summary: "A page of the task's events",
    scope: 'tasks:read',
    query: TaskEventsQuery,
    status: 200,
    response: TaskEventsResponse,
  },
  {
    method: 'get',
    path: '/tasks/{task_id}/stream',
    summary: 'SSE: replay then live; id = sequence; Last-Event-ID resumes; ends after the final event',
    scope: 'tasks:read',
    query: StreamQuery,
    status: 200,
    contentType: 'text/event-stream',
    headers: [{ name: 'Last-Event-ID', description: 'resume after this sequence' }],
  },
  {
    method: 'post',
    path: '/tasks/{task_id}/cancel',
    summary: 'Cancel a task',
    scope: 'tasks:write',
    body: CancelBody,
    status: 202,
    response: CancelResponse,
  },
  {
    method: 'post',
    path: '/tasks/{task_id}/permissions/{request_id}',
    summary: 'Answer a pending permission request',
    scope: 'approvals',
    body: ResolvePermissionBody,
    status: 202,
    response: ResolutionResponse,
  },
  {
    method: 'post',
    path: '/tasks/{task_id}/secrets/{request_id}',
    summary: 'Provide a secret (never stored, logged or echoed)',
    scope: 'approvals',
    body: ProvideSecretBody,
    status: 202,
    response: ResolutionResponse,
  },
  {
    method: 'get',
    path: '/admin/events',
    summary: 'The global event log',
    scope: 'admin',
    query: AdminEventsQuery,
    status: 200,
    response: AdminEventsResponse,
  },
  {
    method: 'get',
    path: '/memory',
    summary:
      'Memory entries: with query, ranked by similarity x weight; without, the newest (409 when RUNLEDGER_MEMORY=off)',
    scope: 'admin',
    query: MemoryQuery,
    status: 200,
    response: MemoryListResponse,
  },
  {
    method: 'delete',
    path: '/memory/{id}',
    summary: 'Delete a memory entry (tombstone in the index, MEMORY_WRITTEN op delete in the log)',
    scope: 'admin',
    status: 200,
    response: MemoryDeleteResponse,
  },
  {
    method: 'get',
    path: '/metrics',
    summary: 'Prometheus metrics',
    scope: 'admin',
    status: 200,
    contentType: 'text/plain',
  },
  {
    method: 'get',
    path: '/health',
    summary: 'DB reachable, migrations current (open)',
    scope: null,
    status: 200,
  },
];

const schemaOf = (s: z.ZodType, io: 'input' | 'output') =>
  z.toJSONSchema(s, { io, unrepresentable: 'any' }) as Record<string, unknown>;

function queryParameters(query: z.ZodObject) {
  const json = schemaOf(query, 'input') as { properties?: Record<string, unknown>; required?: string[] };
  return Object.entries(json.properties ?? {}).map(([name, schema]) => ({
    name,
    in: 'query',
    required: json.required?.includes(name) ?? false,
    schema,
  }));
}

/** OpenAPI 3.1 document generated from the same zod DTOs the controllers validate with. */
export function buildOpenApiDocument(): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  const errorContent = { 'application/json': { schema: schemaOf(ErrorResponse, 'output') } };
  for (const op of OPERATIONS) {
    const parameters: unknown[] = [];
    if (op.path.includes('{task_id}')) parameters.push(taskId);
    if (op.path.includes('{request_id}')) parameters.push(requestId);
    if (op.path.includes('{id}')) parameters.push(entryId);
    if (op.query) parameters.push(...queryParameters(op.query));
    for (const h of op.headers ?? [])
      parameters.push({
        name: h.name,
        in: 'header',
        required: false,
        description: h.description,
        schema: { type: 'string' },
      });
    const ok = op.response
      ? { description: 'ok', content: { 'application/json': { schema: schemaOf(op.response, 'output') } } }
      : {
          description: 'ok',
          content: { [op.contentType ?? 'application/json']: { schema: { type: 'string' } } },
        };
    const responses: Record<string, unknown> = {
      [op.status]: ok,
      400: { description: 'invalid input', content: errorContent },
    };
    if (op.scope) {
      responses[401] = { description: 'missing or invalid token', content: errorContent };
      responses[403] = { description: `token lacks the ${op.scope} scope`, content: errorContent };
      responses[429] = { description: 'rate limited; see Retry-After', content: errorContent };
    }
    if (op.path.includes('{task_id}'))
      responses[404] = { description: 'no such task', content: errorContent };
    if (op.path.includes('{id}'))
      responses[404] = { description: 'no such memory entry', content: errorContent };
    if (op.method === 'post') {
      responses[409] = {
        description: 'conflict (idempotency key reuse, request no longer pending, wrong state)',
        content: errorContent,
      };
      responses[413] = { description: 'body too large', content: errorContent };
    }
    paths[op.path] = {
      ...paths[op.path],
      [op.method]: {
        summary: op.summary,
        ...(op.scope ? { security: [{ bearer: [] }], 'x-required-scope': op.scope } : { security: [] }),
        parameters,
        ...(op.body
          ? {
              requestBody: {
                required: !op.body.safeParse(undefined).success,
                content: { 'application/json': { schema: schemaOf(op.body, 'input') } },
              },
            }
          : {}),
        responses,
      },
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Runledger API',
      version: '0.1.0',
      description:
        'Event-sourced runtime for multi-agent LLM tasks. WebSocket /ws: send {type:"auth",token}, then {type:"subscribe",task_id,after_seq} or ' +
        '{type:"subscribe_all",after_position}; the server replies {type:"event",subscription_id,event} in order, replay then live.',
    },
    components: {
      schemas: {
        WsClientMessage: schemaOf(WsClientMessage, 'input'),
        RuntimeEvent: schemaOf(RuntimeEventEnvelope, 'output'),
      },
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description: 'scopes: tasks:read, tasks:write, approvals, admin',
        },
      },
    },
    paths,
  };
}
