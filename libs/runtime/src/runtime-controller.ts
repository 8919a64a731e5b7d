import { EventEmitter } from 'node:events';
import { OnModuleDestroy } from '@nestjs/common';
import {
  ConcurrencyError,
  EventPayload,
  IdempotencyConflictError,
  MCP_ELICITATION_RULE,
  IllegalStateError,
  NewEvent,
  NotFoundError,
  PermissionDecision,
  RunSettings,
  TaskStatus,
  UserTask,
  ValidationError,
  canonicalJson,
  isFinalEventType,
  newId,
  sha256,
} from '@runledger/contracts';
import { EventStore } from '@runledger/event-store';
import { checkElicitationContent } from '@runledger/tools';
import { CheckpointStore } from '@runledger/state-store';
import { loadProgress } from './checkpoints';
import { SecretVault, ShutdownSignal } from './ports';
import type { ReplayRequest, ReplayResult } from './replay';
import { SessionSecrets } from './session-secrets';
import { TaskProgress } from './progress';
import { RuntimeLogger } from './runtime-logger';
import { RuntimeLoop } from './runtime-loop';
import { TaskWriter } from './task-writer';

export interface SubmitOptions {
  idempotency_key?: string | null;
  source: 'api' | 'cli' | 'fork' | 'replay';
  /**
   * The settings recorded for the task: a replay gives its recording's (null: the recording had
   * none, so none are recorded); otherwise those this process runs tasks under.
   */
  settings?: RunSettings | null;
}

export interface SubmitResult {
  task_id: string;
  status: TaskStatus;
  /** false when an idempotency key matched an earlier, identical submission */
  created: boolean;
}

export interface RuntimeControllerDeps {
  store: EventStore;
  loop: RuntimeLoop;
  vault: SecretVault;
  /** the session's secrets, redacted from every later event of the session */
  secrets: SessionSecrets;
  /** tasks run at once in this process */
  concurrency: number;
  logger: RuntimeLogger;
  /** where a task's progress is loaded from: its latest snapshot + the events after it; the whole log when null */
  checkpoints?: CheckpointStore | null;
  /** what this process runs a task asking for `budgets` under, recorded in its TASK_RECEIVED */
  runSettings: (budgets: UserTask['budgets']) => RunSettings;
  /** re-runs a recorded task offline as a new task (see replayTask) */
  replay: (sourceTaskId: string, options: ReplayRequest) => Promise<ReplayResult>;
}

/** task_id of an idempotency key: the same key always names the same task, so two racing submissions collide in the store. */
export const taskIdForKey = (key: string): string => `task_${sha256(`idempotency:${key}`).slice(0, 32)}`;

const SUSPENDED: readonly TaskStatus[] = ['awaiting_permission', 'awaiting_secret'];

/**
 * The runtime's one facade, for HTTP, WebSocket and the CLI: submit returns at
 * once and the task runs on an in-process queue; cancel, permission and secret
 * answers, fork, replay, and resume on boot. Stops (in-flight tasks left to
 * resume) when the application shuts down, before the storage closes.
 */
export class RuntimeController implements OnModuleDestroy {
  private readonly queue: string[] = [];
  private readonly active = new Map<string, { ctrl: AbortController; done: Promise<void> }>();
  private readonly again = new Set<string>();
  private readonly idle = new EventEmitter();
  private closed = false;

  constructor(private readonly deps: RuntimeControllerDeps) {
    this.idle.setMaxListeners(0);
  }

  async submit(input: UserTask, options: SubmitOptions): Promise<SubmitResult> {
    const parsed = UserTask.safeParse(input);
    if (!parsed.success)
      throw new ValidationError(
        `invalid task: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
        parsed.error.issues,
      );
    const task = parsed.data;
    const key = options.idempotency_key ?? null;
    const request_hash = sha256(canonicalJson(task));
    const task_id = key ? taskIdForKey(key) : newId('task');
    const session_id = task.session_id ?? newId('sess');
    const settings = options.settings === undefined ? this.deps.runSettings(task.budgets) : options.settings;
    try {
      await this.deps.store.append(
        task_id,
        [
          {
            type: 'TASK_RECEIVED',
            session_id,
            payload: {
              input: task.input,
              session_id,
              accept_checks: task.accept_checks ?? [],
              budgets: task.budgets ?? {},
              idempotency_key: key,
              request_hash,
              source: options.source,
              forked_from: null,
              ...(settings ? { settings } : {}),
            },
          },
        ],
        { expected: 'no_stream' },
      );
    } catch (err) {
      if (!(err instanceof ConcurrencyError) || !key) throw err;
      const [first] = await this.deps.store.readStream(task_id, { limit: 1 });
      if (first?.type !== 'TASK_RECEIVED' || first.payload.request_hash !== request_hash) {
        throw new IdempotencyConflictError(
          `idempotency key already used for a different request (task ${task_id})`,
          { task_id },
        );
      }
      return { task_id, status: (await this.progress(task_id)).status, created: false };
    }
    this.enqueue(task_id);
    return { task_id, status: 'queued', created: true };
  }

  /**
   * A new task that starts from event `atSequence` of an old one: its history
   * up to there is copied (an ending is not), and the loop continues from that
   * state as it would after a restart. The source stays as it is.
   */
  async fork(sourceTaskId: string, atSequence: number): Promise<SubmitResult> {
    const events = await this.deps.store.readWholeStream(sourceTaskId);
    const [first] = events;
    if (first?.type !== 'TASK_RECEIVED') throw new NotFoundError(`task ${sourceTaskId} not found`);
    if (!Number.isInteger(atSequence) || atSequence < 1 || atSequence > events.length) {
      throw new ValidationError(`sequence must be between 1 and ${events.length}`);
    }
    const task_id = newId('task');
    const copied = events.slice(1, atSequence).filter((e) => !isFinalEventType(e.type));
    await this.deps.store.append(
      task_id,
      [
        {
          type: 'TASK_RECEIVED',
          session_id: first.session_id,
          payload: {
            ...first.payload,
            idempotency_key: null,
            request_hash: null,
            source: 'fork',
            forked_from: { task_id: sourceTaskId, sequence: atSequence },
          },
        },
        ...copied.map(
          (e) =>
            ({
              type: e.type,
              payload: e.payload,
              session_id: e.session_id,
              causation_id: e.event_id,
            }) as NewEvent,
        ),
      ],
      { expected: 'no_stream' },
    );
    this.enqueue(task_id);
    return { task_id, status: 'queued', created: true };
  }

  /** Where the task stands: its latest checkpoint + the events after it (equal to a full fold). */
  progress(taskId: string): Promise<TaskProgress> {
    return loadProgress(this.deps.store, this.deps.checkpoints ?? null, taskId);
  }

  async cancel(taskId: string): Promise<void> {
    const p = await this.progress(taskId);
    if (p.final) {
      if (p.status === 'cancelled') return;
      throw new IllegalStateError(`task ${taskId} already ended (${p.status})`);
    }
    const running = this.active.get(taskId);
    const queued = this.queue.indexOf(taskId);
    if (queued !== -1) this.queue.splice(queued, 1);
    this.again.delete(taskId);
    if (running) {
      running.ctrl.abort();
      await running.done;
    }
    const writer = await TaskWriter.open(this.deps.store, taskId);
    if (!writer.progress.final)
      await this.deps.loop.end(writer, { stop_reason: 'cancelled', detail: 'cancelled by request' }, null);
  }

  /**
   * A decision for the pending permission request. When the request is an MCP server's form
   * (rule mcp_elicitation), allow_once carries what the person filled in (`content`, checked against
   * the form, defaults filled in), which the call's server then gets; deny declines the form.
   */
  async resolvePermission(
    taskId: string,
    requestId: string,
    decision: PermissionDecision,
    content?: Record<string, unknown>,
  ): Promise<void> {
    const p = await this.progress(taskId);
    const pending = p.pendingPermission;
    if (!pending || pending.request_id !== requestId || p.final)
      throw new IllegalStateError(`permission request ${requestId} of task ${taskId} is not pending`);
    const answer = formAnswer(pending, decision, content);
    await this.appendIfUnchanged(p, {
      type: 'PERMISSION_RESOLVED',
      payload: {
        request_id: requestId,
        call_id: pending.call_id,
        decision,
        args_hash: pending.args_hash,
        tool: pending.tool,
        ...(decision === 'allow_always' && pending.covers ? { covers: pending.covers } : {}),
        ...(answer ? { content: answer } : {}),
      },
    });
    this.enqueue(taskId);
  }

  /**
   * The value goes to the one call that asked for it, and stays in memory to be redacted from the
   * session's later output; the log only learns that it came, and its keyed fingerprint.
   */
  async provideSecret(taskId: string, requestId: string, secret: string): Promise<void> {
    const p = await this.progress(taskId);
    const pending = p.pendingSecret;
    if (!pending || pending.request_id !== requestId || p.final)
      throw new IllegalStateError(`secret request ${requestId} of task ${taskId} is not pending`);
    this.deps.vault.put(taskId, pending.call_id, pending.secret_name, secret);
    const fingerprint = this.deps.secrets.remember(p.session_id, secret);
    await this.appendIfUnchanged(p, {
      type: 'SECRET_PROVIDED',
      payload: {
        request_id: requestId,
        call_id: pending.call_id,
        secret_name: pending.secret_name,
        fingerprint,
      },
    });
    this.enqueue(taskId);
  }

  /** Every task the log shows unfinished and not waiting for a person is queued again. */
  async resumeUnfinished(): Promise<string[]> {
    const received = new Set<string>();
    let after = 0;
    for (;;) {
      const page = await this.deps.store.readAll({
        after_position: after,
        limit: 1000,
        types: ['TASK_RECEIVED', 'TASK_COMPLETED', 'TASK_FAILED', 'TASK_CANCELLED'],
      });
      for (const e of page) {
        if (e.type === 'TASK_RECEIVED') received.add(e.task_id);
        else received.delete(e.task_id);
      }
      if (page.length < 1000) break;
      after = page[page.length - 1].position;
    }
    const resumed: string[] = [];
    for (const taskId of received) {
      if (this.active.has(taskId) || this.queue.includes(taskId)) continue;
      const p = await this.progress(taskId);
      if (p.final || SUSPENDED.includes(p.status)) continue;
      if (p.last_seq > 1) {
        await this.appendIfUnchanged(p, {
          type: 'GUARD_TRIGGERED',
          payload: {
            guard: 'resumed',
            round: p.round,
            detail: 'resumed from the log after a restart',
            data: { at_sequence: p.last_seq },
          },
        }).catch((err: unknown) =>
          this.deps.logger.warn({ task_id: taskId, err }, 'resume marker not written'),
        );
      }
      resumed.push(taskId);
      this.enqueue(taskId);
    }
    return resumed;
  }

  /** Resolves once the task is neither queued nor running here: ended, or waiting for a person. */
  async settled(taskId: string): Promise<TaskProgress> {
    while (this.active.has(taskId) || this.queue.includes(taskId)) {
      await new Promise((resolve) => this.idle.once(taskId, resolve));
    }
    return this.progress(taskId);
  }

  /**
   * Re-run a recorded task offline as a new task (source `replay`): models, tools and critic answer
   * from its log, under its recorded settings and clock. Nothing reaches the live log unless `save`.
   */
  replay(sourceTaskId: string, options: ReplayRequest = {}): Promise<ReplayResult> {
    return this.deps.replay(sourceTaskId, options);
  }

  onModuleDestroy(): Promise<void> {
    return this.close();
  }

  /** Stop taking work; in-flight tasks are aborted and left for resumeUnfinished. */
  async close(): Promise<void> {
    this.closed = true;
    this.queue.length = 0;
    const running = [...this.active.values()];
    for (const r of running) r.ctrl.abort(new ShutdownSignal());
    await Promise.allSettled(running.map((r) => r.done));
  }

  private async appendIfUnchanged(
    p: TaskProgress,
    event: Parameters<EventStore['append']>[1][number],
  ): Promise<void> {
    try {
      await this.deps.store.append(p.task_id, [{ ...event, session_id: p.session_id }], {
        expected: p.last_seq,
      });
    } catch (err) {
      if (err instanceof ConcurrencyError)
        throw new IllegalStateError(`task ${p.task_id} changed meanwhile; try again`);
      throw err;
    }
  }

  private enqueue(taskId: string): void {
    if (this.closed) return;
    if (this.active.has(taskId)) {
      this.again.add(taskId);
      return;
    }
    if (!this.queue.includes(taskId)) this.queue.push(taskId);
    this.pump();
  }

  private pump(): void {
    while (!this.closed && this.active.size < this.deps.concurrency && this.queue.length > 0) {
      const taskId = this.queue.shift()!;
      const ctrl = new AbortController();
      const done = this.deps.loop
        .runTask(taskId, ctrl.signal)
        .then(() => undefined)
        .catch((err: unknown) =>
          this.deps.logger.error({ task_id: taskId, err }, 'task stopped on an unexpected error'),
        )
        .finally(() => {
          this.active.delete(taskId);
          if (this.again.delete(taskId)) this.enqueue(taskId);
          this.idle.emit(taskId);
          this.pump();
        });
      this.active.set(taskId, { ctrl, done });
    }
  }
}

/** The content an answer to a permission request carries: only an MCP server's form takes one, and only when accepted. */
function formAnswer(
  pending: EventPayload<'TASK_AWAITING_PERMISSION'>,
  decision: PermissionDecision,
  content: Record<string, unknown> | undefined,
): Record<string, unknown> | undefined {
  if (pending.rule !== MCP_ELICITATION_RULE) {
    if (content !== undefined)
      throw new ValidationError(
        "content answers an MCP server's form only; this request asks for a decision",
      );
    return undefined;
  }
  if (decision === 'deny') {
    if (content !== undefined) throw new ValidationError('a declined form takes no content');
    return undefined;
  }
  if (decision !== 'allow_once')
    throw new ValidationError(
      `an MCP server's form is answered allow_once (with its content) or deny, not ${decision}`,
    );
  const schema = (pending.args.requested_schema ?? {}) as Record<string, unknown>;
  const checked = checkElicitationContent(schema, content ?? {});
  if (!checked.ok)
    throw new ValidationError(`the content does not fill the form: ${checked.problem}`, {
      requested_schema: schema,
    });
  return checked.content;
}
