import { createZodDto } from './zod-dto';
import { z } from 'zod';
import { RemoteTaskState, StopReason, TaskStatus, TaskUsage, TodoItem, UserTask } from '@runledger/contracts';
import { queryInt } from './zod.pipe';
import {
  ChildTaskView,
  INPUT_LINE_MAX,
  TaskLineage,
  TaskProgress,
  TaskView,
  pendingSignalWait,
  pendingTimer,
} from '@runledger/runtime';

export const CreateTaskBody = UserTask.extend({
  callback_url: z
    .url({ protocol: /^https?$/ })
    .max(2000)
    .optional()
    .describe(
      "POSTed the task's status whenever it changes (JSON: task_id, session_id, sequence, event_type, status, stop_reason, result, pending, usage), " +
        'signed with the runledger-signature header (t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">), retried with backoff, recorded in the log; see docs/time.md',
    ),
  callback_token: z
    .string()
    .min(1)
    .max(1000)
    .optional()
    .describe('sent back with every delivery in the x-a2a-notification-token header (needs callback_url)'),
}).refine((b) => b.callback_token === undefined || b.callback_url !== undefined, {
  message: 'callback_token needs callback_url',
  path: ['callback_token'],
});
export class CreateTaskDto extends createZodDto(CreateTaskBody) {}

export const IdempotencyKey = z
  .string()
  .regex(/^[\x21-\x7e]{1,200}$/, 'must be 1-200 printable ASCII characters')
  .optional();

export const ListTasksQuery = z
  .object({
    status: TaskStatus.optional(),
    // any session id a task may be submitted with can be filtered on
    session_id: UserTask.shape.session_id,
    q: z
      .string()
      .min(1)
      .max(200)
      .optional()
      .describe('only tasks whose input contains this text (case-insensitive for ASCII letters)'),
    limit: queryInt(1, 500).default(50),
    cursor: z
      .string()
      .regex(/^[A-Za-z0-9_-]{1,500}$/, 'not a cursor returned by this API')
      .optional(),
  })
  .strict();
export type ListTasksQuery = z.output<typeof ListTasksQuery>;
export class ListTasksQueryDto extends createZodDto(ListTasksQuery) {}

/** POST /tasks/:task_id/fork: from which event of the task, and optionally with which orchestrator model. */
export const ForkTaskBody = z
  .object({
    at_sequence: z
      .number()
      .int()
      .min(1)
      .max(Number.MAX_SAFE_INTEGER)
      .describe("the event of the task to continue from (its sequence); at most the task's last"),
    model: z
      .string()
      .regex(/^[\x21-\x7e]{1,200}$/, 'must be 1-200 printable ASCII characters')
      .optional()
      .describe(
        'the orchestrator model the fork runs with: sys_util, or a model of the configured OpenAI-compatible server; the configured one when absent',
      ),
    allow_mutation: z
      .boolean()
      .optional()
      .describe(
        "round policy: allow the fork to change things whatever its input says, recorded as a person's decision in its TASK_RECEIVED (when the source ran with the round policy on)",
      ),
  })
  .strict();
export class ForkTaskDto extends createZodDto(ForkTaskBody) {}

export const SubmitResponse = z.object({ task_id: z.string(), status: TaskStatus });
export class SubmitResponseDto extends createZodDto(SubmitResponse) {}

export const PendingRequestResponse = z.object({
  task_id: z
    .string()
    .describe('the task the request belongs to and is answered through: this one or one it delegated to'),
  request_id: z.string(),
  kind: z
    .enum(['permission', 'secret', 'client_tool'])
    .describe('client_tool: a call to a tool an AG-UI frontend offered, answered by its resume entry'),
  call_id: z.string(),
  tool: z.string(),
  reason: z.string(),
  args: z.record(z.string(), z.unknown()).nullable(),
  secret_name: z.string().nullable(),
  /** permission requests: what an allow_always answer would cover (tool, rule, scope) */
  covers: z.string().nullable(),
});

export const TaskResponse = z.object({
  task_id: z.string(),
  status: TaskStatus,
  session_id: z.string(),
  input_first_line: z
    .string()
    .max(INPUT_LINE_MAX)
    .describe("the input's first non-blank line, cut to 200 characters (… marks a cut)"),
  stop_reason: StopReason.nullable(),
  stop_detail: z.string().nullable(),
  result: z.string().nullable(),
  pending: z.array(PendingRequestResponse),
  usage: TaskUsage,
  last_seq: z.number().int(),
  created_at: z.string(),
  updated_at: z.string(),
  duration_ms: z
    .number()
    .int()
    .nonnegative()
    .nullable()
    .describe('from submission to the final event; null while the task has not ended'),
});
export type TaskResponse = z.infer<typeof TaskResponse>;
export class TaskResponseDto extends createZodDto(TaskResponse) {}

/** One task with where it stands in its tree; `pending` also lists the requests of the tasks below it. */
export const TaskDetailResponse = TaskResponse.extend({
  parent_task_id: z
    .string()
    .nullable()
    .describe('the task that delegated this one; null for a submitted task'),
  root_task_id: z.string().describe('the top of the tree (this task when it has no parent)'),
  depth: z.number().int().nonnegative().describe('delegations down from the root'),
  agent: z.string().nullable().describe('the agent a delegated task runs as'),
  todos: z
    .array(TodoItem)
    .describe(
      "the task's todos in the order added (its own: a session's next task starts with none); active ones count toward acceptance",
    ),
});
export type TaskDetailResponse = z.infer<typeof TaskDetailResponse>;

/** What a `waiting` task waits for: a time, or a signal (until a time, with a timeout). */
export const WaitingFor = z
  .discriminatedUnion('kind', [
    z.object({ kind: z.literal('timer'), timer_id: z.string(), due_at: z.string() }),
    z.object({
      kind: z.literal('signal'),
      wait_id: z.string(),
      name: z.string(),
      due_at: z.string().nullable().describe('when the wait times out; null: it never does'),
    }),
    z.object({
      kind: z.literal('turn'),
      after_task_id: z.string().describe('the unfinished task of the session this queued one runs after'),
    }),
  ])
  .nullable()
  .describe(
    'what a `waiting` task waits for, or what a `queued` task of a busy session runs after (kind turn); null otherwise',
  );
export type WaitingFor = z.infer<typeof WaitingFor>;

/** A task's detail with what it waits for. */
export const TaskWaitingDetailResponse = TaskDetailResponse.extend({ waiting_for: WaitingFor });
export type TaskWaitingDetailResponse = z.infer<typeof TaskWaitingDetailResponse>;
export class TaskWaitingDetailResponseDto extends createZodDto(TaskWaitingDetailResponse) {}
export class TaskDetailResponseDto extends createZodDto(TaskDetailResponse) {}

export const ChildTaskResponse = TaskResponse.extend({
  agent: z.string().describe('the agent the child runs as'),
  step_id: z
    .string()
    .nullable()
    .describe("the parent's plan step that delegated (`delegate` for a delegate directive)"),
  remote: z
    .object({
      url: z.string().describe("the remote agent's card URL or base URL"),
      remote_task_id: z
        .string()
        .nullable()
        .describe("the remote agent's id of the task; null until heard of"),
      state: RemoteTaskState.nullable().describe("the remote task's A2A state as last recorded"),
    })
    .nullable()
    .describe(
      "a remote agent's task (A2A): the view is what the parent recorded of it, and task_id names no local task; null for a local child",
    ),
});
export const TaskChildrenResponse = z.object({ task_id: z.string(), children: z.array(ChildTaskResponse) });
export type TaskChildrenResponse = z.infer<typeof TaskChildrenResponse>;
export class TaskChildrenResponseDto extends createZodDto(TaskChildrenResponse) {}

export const toTaskDetailResponse = (
  t: TaskView,
  lineage: TaskLineage,
  descendantsPending: TaskView['pending'],
  todos: TodoItem[],
): TaskDetailResponse => ({
  ...toTaskResponse(t),
  pending: [...t.pending, ...descendantsPending],
  parent_task_id: lineage.parent_task_id,
  root_task_id: lineage.root_task_id,
  depth: lineage.depth,
  agent: lineage.agent,
  todos,
});

export const toChildTaskResponse = (c: ChildTaskView) => ({
  ...toTaskResponse(c),
  agent: c.agent,
  step_id: c.step_id,
  remote: c.remote,
});

export const TaskListResponse = z.object({
  tasks: z.array(TaskResponse),
  next_cursor: z.string().nullable(),
});
export class TaskListResponseDto extends createZodDto(TaskListResponse) {}

export const toTaskResponse = (t: TaskView): TaskResponse => ({
  task_id: t.task_id,
  status: t.status,
  session_id: t.session_id,
  input_first_line: t.input_first_line,
  stop_reason: t.stop_reason,
  stop_detail: t.stop_detail,
  result: t.result,
  pending: t.pending,
  usage: t.usage,
  last_seq: t.last_seq,
  created_at: t.created_at,
  updated_at: t.updated_at,
  duration_ms: t.duration_ms,
});

/** What the task's progress says it waits for (a wait for a signal names its timeout's due time). */
export function waitingFor(p: TaskProgress): WaitingFor {
  if (p.queuedBehind !== null && !p.final) return { kind: 'turn', after_task_id: p.queuedBehind };
  const signal = pendingSignalWait(p);
  const timer = pendingTimer(p);
  if (signal)
    return {
      kind: 'signal',
      wait_id: signal.wait_id,
      name: signal.name,
      due_at: timer?.timer_id === signal.wait_id ? timer.due_at : null,
    };
  return timer ? { kind: 'timer', timer_id: timer.timer_id, due_at: timer.due_at } : null;
}
