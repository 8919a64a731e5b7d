import { TodoItem } from '@runledger/contracts';
import { EventStore } from '@runledger/event-store';
import { todoList, todoStateFromEvents } from '../discipline/todos';
import { PendingRequestView, TaskView, TaskViews } from '../log/task-views';

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
    const started = await this.store.readAll({ task_id: taskId, types: ['CHILD_TASK_STARTED'] });
    const out: ChildTaskView[] = [];
    for (const e of started) {
      if (e.type !== 'CHILD_TASK_STARTED') continue;
      // intent recorded, child not created yet (a restart in between): it appears once it exists
      const view = await this.views.get(e.payload.child_task_id);
      if (view) out.push({ ...view, agent: e.payload.agent, step_id: e.payload.step_id });
    }
    return out;
  }

  /** the pending requests of every task below this one, each naming the task that answers it */
  async descendantsPending(taskId: string): Promise<PendingRequestView[]> {
    const out: PendingRequestView[] = [];
    for (let level = await this.children(taskId); level.length > 0;) {
      const next: ChildTaskView[] = [];
      for (const child of level) {
        out.push(...child.pending);
        next.push(...(await this.children(child.task_id)));
      }
      level = next;
    }
    return out;
  }
}
