import { Observable } from 'rxjs';
import { EventType, PermissionDecision, RuntimeEvent, TaskStatus, UserTask } from '@runledger/contracts';
import { EventBus, EventStore } from '@runledger/event-store';
import { ApiBackend, HealthReport, TaskPage, TaskView, TaskListQuery } from './runtime.port';

/** The runtime's front door, as RuntimeService exposes it. */
export interface TaskCommands {
  submit(
    task: UserTask,
    options: { idempotency_key?: string | null; source: 'api' },
  ): Promise<{ task_id: string; status: TaskStatus }>;
  cancel(taskId: string): Promise<void>;
  resolvePermission(taskId: string, requestId: string, decision: PermissionDecision): Promise<void>;
  provideSecret(taskId: string, requestId: string, secret: string): Promise<void>;
  resumeUnfinished(): Promise<string[]>;
}

/** Reads of the task-state projection. */
export interface TaskReadModel {
  get(taskId: string): Promise<TaskView | null>;
  list(query: TaskListQuery): Promise<TaskPage>;
  countByStatus(): Promise<Partial<Record<TaskStatus, number>>>;
}

export interface BackendParts {
  commands: TaskCommands;
  store: EventStore;
  bus: EventBus;
  tasks: TaskReadModel;
  health(): Promise<HealthReport>;
  /** stops the runtime and closes the database */
  close(): Promise<void>;
}

/** ApiBackend over the composed runtime: commands to RuntimeService, reads to the store and the projection. */
export class RuntimeApiBackend extends ApiBackend {
  readonly committed$: Observable<RuntimeEvent>;

  constructor(private readonly parts: BackendParts) {
    super();
    this.committed$ = parts.bus.events$;
  }

  async submit(task: UserTask, idempotencyKey: string | null) {
    const { task_id, status } = await this.parts.commands.submit(task, {
      idempotency_key: idempotencyKey,
      source: 'api',
    });
    return { task_id, status };
  }

  cancel(taskId: string) {
    return this.parts.commands.cancel(taskId);
  }

  resolvePermission(taskId: string, requestId: string, decision: PermissionDecision) {
    return this.parts.commands.resolvePermission(taskId, requestId, decision);
  }

  provideSecret(taskId: string, requestId: string, secret: string) {
    return this.parts.commands.provideSecret(taskId, requestId, secret);
  }

  getTask(taskId: string) {
    return this.parts.tasks.get(taskId);
  }

  listTasks(query: TaskListQuery) {
    return this.parts.tasks.list(query);
  }

  countTasksByStatus() {
    return this.parts.tasks.countByStatus();
  }

  readStream(taskId: string, options: { after_seq: number; limit: number }) {
    return this.parts.store.readStream(taskId, options);
  }

  readAll(options: { after_position: number; limit: number; types?: EventType[]; task_id?: string }) {
    return this.parts.store.readAll(options);
  }

  async headPosition() {
    return (await this.parts.store.head()).position;
  }

  health() {
    return this.parts.health();
  }

  async start() {
    await this.parts.commands.resumeUnfinished();
  }

  close() {
    return this.parts.close();
  }
}
