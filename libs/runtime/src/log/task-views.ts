import {
  RuntimeEvent,
  StopReason,
  TASK_STATUSES,
  TaskStatus,
  TaskUsage,
  ValidationError,
  isTerminalStatus,
} from '@runledger/contracts';
import { EventStore } from '@runledger/event-store';
import { CheckpointStore, TaskState, TaskStateStore, foldTaskState } from '@runledger/state-store';

export interface PendingRequestView {
  /** the task the request belongs to (and is answered through): this one, or a task it delegated to */
  task_id: string;
  request_id: string;
  kind: 'permission' | 'secret' | 'client_tool';
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

/** A task as the API shows it. */
export interface TaskView {
  task_id: string;
  status: TaskStatus;
  session_id: string;
  /** the input's first non-blank line, at most INPUT_LINE_MAX characters: what tells tasks apart in a list */
  input_first_line: string;
  stop_reason: StopReason | null;
  /** what the stop reason means for this task, in words */
  stop_detail: string | null;
  result: string | null;
  pending: PendingRequestView[];
  usage: TaskUsage;
  last_seq: number;
  created_at: string;
  updated_at: string;
  /** from TASK_RECEIVED to the final event; null while the task has not ended */
  duration_ms: number | null;
}

export interface TaskListQuery {
  status?: TaskStatus;
  session_id?: string;
  /** a case-insensitive (ASCII) substring of the input */
  q?: string;
  limit: number;
  cursor?: string;
}

export interface TaskViewPage {
  tasks: TaskView[];
  next_cursor: string | null;
}

/** A task of a session with its whole input: what a later task of the session is shown of it. */
export interface SessionTask {
  task_id: string;
  status: TaskStatus;
  input: string;
  result: string | null;
  stop_reason: StopReason | null;
  /** what it has spent so far (a delegating task's includes its ended children's) */
  usage: Pick<TaskUsage, 'total_tokens' | 'cost_usd'>;
}

const sessionTaskOf = (s: TaskState): SessionTask => ({
  task_id: s.task_id,
  status: s.status,
  input: s.input,
  result: s.result,
  stop_reason: s.stop_reason,
  usage: { total_tokens: s.usage.total_tokens, cost_usd: s.usage.cost_usd },
});

/** Reads of tasks as views, for the API and the dashboard. */
export abstract class TaskViews {
  abstract get(taskId: string): Promise<TaskView | null>;
  abstract list(query: TaskListQuery): Promise<TaskViewPage>;
  /** The latest `limit` (1..500) tasks of a session, oldest first. */
  abstract sessionTasks(sessionId: string, limit: number): Promise<SessionTask[]>;
  abstract countByStatus(): Promise<Partial<Record<TaskStatus, number>>>;
}

/** A task's view folded from its events with the projection's own pure fold (the log is the truth). */
export function taskViewFromEvents(events: readonly RuntimeEvent[]): TaskView | null {
  return events.length === 0 ? null : taskViewFromState(foldTaskState(events)!);
}

export const INPUT_LINE_MAX = 200;

/** The first line with text in it, cut to INPUT_LINE_MAX characters (an ellipsis marks the cut). */
export function inputFirstLine(input: string): string {
  const line = input.split(/\r?\n/).find((l) => l.trim() !== '') ?? '';
  const trimmed = line.trim();
  return trimmed.length > INPUT_LINE_MAX ? `${trimmed.slice(0, INPUT_LINE_MAX - 1)}…` : trimmed;
}

/** SQLite's LIKE folds ASCII letters only; the log-backed views match the same way. */
const foldAscii = (s: string) => s.replace(/[A-Z]/g, (c) => c.toLowerCase());

const encodeCursor = (position: number) =>
  Buffer.from(JSON.stringify({ before: position })).toString('base64url');
function decodeCursor(cursor: string): number {
  try {
    const before = (JSON.parse(Buffer.from(cursor, 'base64url').toString()) as { before?: unknown }).before;
    if (typeof before === 'number' && Number.isSafeInteger(before) && before > 0) return before;
  } catch {
    // fall through: not one of ours
  }
  throw new ValidationError('invalid cursor: pass next_cursor from a previous page');
}

/**
 * Task reads straight from the log: a task is a fold of its stream (from its
 * latest checkpoint when there are checkpoints), the list walks TASK_RECEIVED
 * newest first, archived tasks' from their segments. Correct but O(log) per list:
 * for stores without the task-state projection (the in-memory reference store).
 */
export class LogTaskViews extends TaskViews {
  constructor(
    private readonly store: EventStore,
    private readonly checkpoints: CheckpointStore | null = null,
  ) {
    super();
  }

  async get(taskId: string): Promise<TaskView | null> {
    const state = await this.state(taskId);
    return state ? taskViewFromState(state) : null;
  }

  async sessionTasks(sessionId: string, limit: number): Promise<SessionTask[]> {
    const received = (await this.receivedEvents()).filter((e) => e.session_id === sessionId).slice(-limit);
    const states = await Promise.all(received.map((e) => this.state(e.task_id)));
    return states.filter((s): s is TaskState => s !== null).map(sessionTaskOf);
  }

  private async state(taskId: string): Promise<TaskState | null> {
    if (!this.checkpoints) return foldTaskState(await this.store.readWholeStream(taskId));
    return (await this.checkpoints.load(taskId))?.state ?? null;
  }

  async list(query: TaskListQuery): Promise<TaskViewPage> {
    const before = query.cursor ? decodeCursor(query.cursor) : Infinity;
    const needle = query.q === undefined ? null : foldAscii(query.q);
    const received = (await this.receivedEvents())
      .filter(
        (e) =>
          e.position < before &&
          (!query.session_id || e.session_id === query.session_id) &&
          (needle === null || (e.type === 'TASK_RECEIVED' && foldAscii(e.payload.input).includes(needle))),
      )
      .reverse();
    const tasks: TaskView[] = [];
    let last: RuntimeEvent | null = null;
    for (const e of received) {
      const view = await this.get(e.task_id);
      if (view && (!query.status || view.status === query.status)) {
        if (tasks.length === query.limit) return { tasks, next_cursor: encodeCursor(last!.position) };
        tasks.push(view);
        last = e;
      }
    }
    return { tasks, next_cursor: null };
  }

  async countByStatus(): Promise<Partial<Record<TaskStatus, number>>> {
    const counts = Object.fromEntries(TASK_STATUSES.map((s) => [s, 0])) as Record<TaskStatus, number>;
    for (const e of await this.receivedEvents()) {
      const view = await this.get(e.task_id);
      if (view) counts[view.status]++;
    }
    return counts;
  }

  private async receivedEvents(): Promise<RuntimeEvent[]> {
    const out: RuntimeEvent[] = [];
    for (let after = 0; ;) {
      // archived tasks too: each keeps its TASK_RECEIVED's position, so cursors and order hold
      const page = await this.store.readAll({
        after_position: after,
        limit: 1000,
        types: ['TASK_RECEIVED'],
        archived: true,
      });
      out.push(...page);
      if (page.length < 1000) return out;
      after = page[page.length - 1].position;
    }
  }
}

/** The projection's row as the API's task view. */
export function taskViewFromState(s: TaskState): TaskView {
  return {
    task_id: s.task_id,
    status: s.status,
    session_id: s.session_id,
    input_first_line: inputFirstLine(s.input),
    stop_reason: s.stop_reason,
    stop_detail: s.stop_detail,
    result: s.result,
    pending: s.pending_requests.map((p) => ({
      task_id: s.task_id,
      request_id: p.request_id,
      kind: p.kind,
      call_id: p.call_id,
      tool: p.tool,
      reason: p.reason,
      args: p.args ?? null,
      secret_name: p.secret_name ?? null,
      covers: p.covers ?? null,
    })),
    usage: s.usage,
    last_seq: s.last_seq,
    created_at: s.created_at,
    updated_at: s.updated_at,
    duration_ms: isTerminalStatus(s.status) ? Date.parse(s.updated_at) - Date.parse(s.created_at) : null,
  };
}

/** Task reads from the task-state projection (kept in the append transaction, so never behind the log). */
export class ProjectionTaskViews extends TaskViews {
  constructor(private readonly states: TaskStateStore) {
    super();
  }

  async get(taskId: string): Promise<TaskView | null> {
    const state = await this.states.get(taskId);
    return state ? taskViewFromState(state) : null;
  }

  async list(query: TaskListQuery): Promise<TaskViewPage> {
    const page = await this.states.list(query);
    return { tasks: page.items.map(taskViewFromState), next_cursor: page.next_cursor };
  }

  async sessionTasks(sessionId: string, limit: number): Promise<SessionTask[]> {
    const page = await this.states.list({ session_id: sessionId, limit });
    return page.items.reverse().map(sessionTaskOf);
  }

  countByStatus(): Promise<Partial<Record<TaskStatus, number>>> {
    return this.states.countByStatus();
  }
}
