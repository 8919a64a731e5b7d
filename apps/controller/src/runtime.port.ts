import { Observable } from 'rxjs';
import {
  EventType,
  PermissionDecision,
  RuntimeEvent,
  StopReason,
  TaskStatus,
  TaskUsage,
  UserTask,
} from '@runledger/contracts';

export interface PendingRequestView {
  request_id: string;
  kind: 'permission' | 'secret';
  call_id: string;
  tool: string;
  reason: string;
  /** permission requests: the arguments the decision binds to */
  args: Record<string, unknown> | null;
  /** secret requests: which secret */
  secret_name: string | null;
  /** permission requests: what an allow_always answer would cover (null for requests logged before it was recorded) */
  covers: string | null;
}

export interface TaskView {
  task_id: string;
  status: TaskStatus;
  session_id: string;
  stop_reason: StopReason | null;
  /** what the stop reason means for this task, in words */
  stop_detail: string | null;
  result: string | null;
  pending: PendingRequestView[];
  usage: TaskUsage;
  last_seq: number;
  created_at: string;
  updated_at: string;
}

export interface TaskListQuery {
  status?: TaskStatus;
  session_id?: string;
  limit: number;
  cursor?: string;
}

export interface TaskPage {
  tasks: TaskView[];
  next_cursor: string | null;
}

export interface HealthReport {
  db: 'reachable' | 'unreachable';
  migrations: 'current' | 'pending' | 'unknown';
  sandbox: string | null;
}

/**
 * Everything the HTTP/WebSocket layer needs from the rest of the system, in
 * one port. The composition adapter fills it from buildRuntime(config), so
 * controllers and gateways stay thin and testable against real parts.
 */
export abstract class ApiBackend {
  abstract submit(
    task: UserTask,
    idempotencyKey: string | null,
  ): Promise<{ task_id: string; status: TaskStatus }>;
  abstract cancel(taskId: string): Promise<void>;
  abstract resolvePermission(taskId: string, requestId: string, decision: PermissionDecision): Promise<void>;
  abstract provideSecret(taskId: string, requestId: string, secret: string): Promise<void>;

  abstract getTask(taskId: string): Promise<TaskView | null>;
  abstract listTasks(query: TaskListQuery): Promise<TaskPage>;
  abstract countTasksByStatus(): Promise<Partial<Record<TaskStatus, number>>>;

  abstract readStream(taskId: string, options: { after_seq: number; limit: number }): Promise<RuntimeEvent[]>;
  abstract readAll(options: {
    after_position: number;
    limit: number;
    types?: EventType[];
    task_id?: string;
  }): Promise<RuntimeEvent[]>;
  abstract headPosition(): Promise<number>;
  /** every committed event, live, in commit order (hot: no replay) */
  abstract readonly committed$: Observable<RuntimeEvent>;

  abstract health(): Promise<HealthReport>;
  /** start background work (resume unfinished tasks); called once the server listens */
  abstract start(): Promise<void>;
  abstract close(): Promise<void>;
}
