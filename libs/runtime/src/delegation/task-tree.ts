import { RemoteTaskState, RuntimeEvent, TaskStatus, TodoItem, emptyUsage } from '@runledger/contracts';
import { EventStore } from '@runledger/event-store';
import { todoList, todoStateFromEvents } from '../discipline/todos';
import { PendingRequestView, TaskView, TaskViews, inputFirstLine } from '../log/task-views';

/** Where a task stands in its tree, from its TASK_RECEIVED. */
export interface TaskLineage {
  parent_task_id: string | null;
  root_task_id: string;
  depth: number;
  /** the agent a delegated task runs as; null for a task a person submitted */
  agent: string | null;
}

/** A child of a task: its view, the agent it runs as and the parent's step that started it. */
export interface ChildTaskView extends TaskView {
  agent: string;
  /** the parent's plan step (`delegate` for a delegate directive) */
  step_id: string | null;
  /** a remote agent's task: where the agent is, its own id for the task (null until heard of) and its A2A state */
  remote: { url: string; remote_task_id: string | null; state: RemoteTaskState | null } | null;
}

/** A remote task's A2A state as one of our statuses (what a person reads on the tree). */
const STATUS_OF_REMOTE: Record<RemoteTaskState, TaskStatus> = {
  submitted: 'queued',
  working: 'running',
  unknown: 'running',
  'input-required': 'awaiting_permission',
  'auth-required': 'awaiting_secret',
  completed: 'completed',
  failed: 'failed',
  rejected: 'failed',
  canceled: 'cancelled',
};

/**
 * A remote agent's task as a child, from what its parent recorded of it: no log of its own is here,
 * its questions are the parent's own requests.
 */
export function remoteChildView(events: readonly RuntimeEvent[], callId: string): ChildTaskView | null {
  const started = events.find((e) => e.type === 'CHILD_TASK_STARTED' && e.payload.call_id === callId);
  if (started?.type !== 'CHILD_TASK_STARTED' || !started.payload.remote) return null;
  let last: RuntimeEvent<'REMOTE_TASK_UPDATED'> | null = null;
  let ended: RuntimeEvent<'CHILD_TASK_ENDED'> | null = null;
  for (const e of events) {
    if (e.type === 'REMOTE_TASK_UPDATED' && e.payload.call_id === callId) last = e;
    if (e.type === 'CHILD_TASK_ENDED' && e.payload.call_id === callId) ended = e;
  }
  const p = started.payload;
  const latest = ended ?? last ?? started;
  return {
    task_id: p.child_task_id,
    status: ended ? ended.payload.status : last ? STATUS_OF_REMOTE[last.payload.state] : 'queued',
    session_id: last?.payload.context_id ?? p.remote!.context_id,
    input_first_line: inputFirstLine(p.input),
    stop_reason: ended?.payload.stop_reason ?? null,
    stop_detail: ended?.payload.detail ?? null,
    result: ended?.payload.result ?? null,
    pending: [],
    usage: ended?.payload.usage ?? last?.payload.usage ?? emptyUsage(),
    last_seq: latest.sequence,
    created_at: started.created_at,
    updated_at: latest.created_at,
    duration_ms: ended ? Date.parse(ended.created_at) - Date.parse(started.created_at) : null,
    agent: p.agent,
    step_id: p.step_id,
    remote: {
      url: p.remote!.url,
      remote_task_id: last?.payload.remote_task_id ?? null,
      state: last?.payload.state ?? null,
    },
  };
}

/**
 * A task's tree, read from the log: a task's TASK_RECEIVED names its parent
 * and root, its parent's CHILD_TASK_STARTED events name its children. No
 * table of its own, so nothing to rebuild.
 */
export class TaskTree {
  constructor(
    private readonly store: EventStore,
    private readonly views: TaskViews,
  ) {}

  async lineage(taskId: string): Promise<TaskLineage | null> {
    const [first] = await this.store.readStream(taskId, { limit: 1 });
    if (first?.type !== 'TASK_RECEIVED') return null;
    return {
      parent_task_id: first.payload.parent_task_id ?? null,
      root_task_id: first.payload.root_task_id ?? taskId,
      depth: first.payload.depth ?? 0,
      agent: first.payload.agent?.name ?? null,
    };
  }

  /** the task's todos, folded from its todo events (its own: never those of another task of its session) */
  async todos(taskId: string): Promise<TodoItem[]> {
    const events = await this.store.readAll({
      task_id: taskId,
      types: ['TODO_ADDED', 'TODO_UPDATED'],
    });
    return todoList(todoStateFromEvents(events));
  }

  /** the task's children in the order they started, each as its view */
  async children(taskId: string): Promise<ChildTaskView[]> {
    const events = await this.store.readAll({
      task_id: taskId,
      types: ['CHILD_TASK_STARTED', 'REMOTE_TASK_UPDATED', 'CHILD_TASK_ENDED'],
    });
    const out: ChildTaskView[] = [];
    for (const e of events) {
      if (e.type !== 'CHILD_TASK_STARTED') continue;
      if (e.payload.remote) {
        out.push(remoteChildView(events, e.payload.call_id)!);
        continue;
      }
      // intent recorded, child not created yet (a restart in between): it appears once it exists
      const view = await this.views.get(e.payload.child_task_id);
      if (view) out.push({ ...view, agent: e.payload.agent, step_id: e.payload.step_id, remote: null });
    }
    return out;
  }

  /** the pending requests of every task below this one, each naming the task that answers it */
  async descendantsPending(taskId: string): Promise<PendingRequestView[]> {
    const out: PendingRequestView[] = [];
    for (let level = await this.children(taskId); level.length > 0;) {
      const next: ChildTaskView[] = [];
      for (const child of level) {
        // a remote child's questions are already this tree's own (its parent forwarded them)
        if (child.remote) continue;
        out.push(...child.pending);
        next.push(...(await this.children(child.task_id)));
      }
      level = next;
    }
    return out;
  }
}
