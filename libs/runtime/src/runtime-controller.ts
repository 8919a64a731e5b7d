import { EventEmitter } from 'node:events';
import { OnModuleDestroy } from '@nestjs/common';
import {
  ConcurrencyError,
  IdempotencyConflictError,
  IllegalStateError,
  LeaseLostError,
  NewEvent,
  RuntimeEvent,
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
import { CheckpointStore } from '@runledger/state-store';
import { loadProgress } from './checkpoints';
import { TaskOwnership } from './ownership/task-ownership';
import { UnfinishedTasks } from './ownership/unfinished-tasks';
import { LeaseLostSignal, SecretVault, ShutdownSignal } from './ports';
import type { ReplayRequest, ReplayResult } from './replay';
import { SessionSecrets } from './session-secrets';
import { TaskProgress } from './progress';
import { RuntimeLogger } from './runtime-logger';
import { RuntimeLoop } from './runtime-loop';
import { TaskWriter, WriterLease } from './task-writer';

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
  /**
   * The leases of the tasks this process runs: claimed before a task runs here, carried by every
   * append of its run (fencing). Absent where no other process can write the log (a replay's own
   * log in memory): then every task runs here, unfenced.
   */
  ownership?: TaskOwnership | null;
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
  private readonly unfinished: UnfinishedTasks;
  /** event ids of the answers this process records: it runs those tasks on itself, noticeCommits skips them */
  private readonly ownAnswers = new Set<string>();
  private readonly detachCommits: () => void;
  private recovery: { timer: NodeJS.Timeout; sweep: Promise<unknown> | null } | null = null;
  private closed = false;

  constructor(private readonly deps: RuntimeControllerDeps) {
    this.idle.setMaxListeners(0);
    this.unfinished = new UnfinishedTasks(deps.store);
    deps.ownership?.onLost((taskId) => this.abandon(taskId));
    this.detachCommits = deps.ownership
      ? deps.store.onCommitted((events) => this.noticeCommits(events))
      : () => undefined;
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
    await this.takeAndEnqueue(task_id);
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
    await this.takeAndEnqueue(task_id);
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

  async resolvePermission(taskId: string, requestId: string, decision: PermissionDecision): Promise<void> {
    const p = await this.progress(taskId);
    const pending = p.pendingPermission;
    if (!pending || pending.request_id !== requestId || p.final)
      throw new IllegalStateError(`permission request ${requestId} of task ${taskId} is not pending`);
    await this.recordResolution(p, {
      type: 'PERMISSION_RESOLVED',
      payload: {
        request_id: requestId,
        call_id: pending.call_id,
        decision,
        args_hash: pending.args_hash,
        tool: pending.tool,
        ...(decision === 'allow_always' && pending.covers ? { covers: pending.covers } : {}),
      },
    });
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
    await this.recordResolution(p, {
      type: 'SECRET_PROVIDED',
      payload: {
        request_id: requestId,
        call_id: pending.call_id,
        secret_name: pending.secret_name,
        fingerprint,
      },
    });
  }

  /**
   * Every task the log shows unfinished, not waiting for a person and not run by a live owner is
   * claimed and queued again (`force`: taken even from a live owner, bumping its lease's epoch).
   */
  async resumeUnfinished(options: { force?: boolean } = {}): Promise<string[]> {
    const candidates = (await this.unfinished.list()).filter(
      (taskId) => !this.active.has(taskId) && !this.queue.includes(taskId),
    );
    const ownership = this.deps.ownership;
    const free = ownership && !options.force ? new Set(await ownership.claimable(candidates)) : null;
    const resumed: string[] = [];
    for (const taskId of candidates) {
      if (this.closed) break;
      if (free && !free.has(taskId)) continue;
      const p = await this.progress(taskId);
      if (p.final || SUSPENDED.includes(p.status)) continue;
      if (ownership && !(await ownership.claim(taskId, { force: options.force }))) continue;
      if (p.last_seq > 1) {
        const marked = await this.appendIfUnchanged(p, {
          type: 'GUARD_TRIGGERED',
          payload: {
            guard: 'resumed',
            round: p.round,
            detail: 'resumed from the log after a restart',
            data: { at_sequence: p.last_seq },
          },
        }).then(
          () => true,
          (err: unknown) => {
            if (err instanceof LeaseLostError) return false;
            this.deps.logger.warn({ task_id: taskId, err }, 'resume marker not written');
            return true;
          },
        );
        if (!marked) continue;
      }
      resumed.push(taskId);
      this.enqueue(taskId);
    }
    return resumed;
  }

  /**
   * A server's crash recovery: resume what nobody runs now, then look again every lease renewal
   * interval, so the tasks of a process that died are taken over once their leases expire.
   */
  async startRecovery(): Promise<string[]> {
    const resumed = await this.resumeUnfinished();
    const ownership = this.deps.ownership;
    if (ownership && !this.closed && !this.recovery) {
      const recovery = {
        sweep: null as Promise<unknown> | null,
        timer: setInterval(() => {
          recovery.sweep ??= this.resumeUnfinished()
            .catch((err: unknown) => this.deps.logger.warn({ err }, 'recovery sweep failed; trying again'))
            .finally(() => (recovery.sweep = null));
        }, ownership.settings.renewMs),
      };
      recovery.timer.unref();
      this.recovery = recovery;
    }
    return resumed;
  }

  /** The owner id of another process that holds a live lease on the task, null when none does. */
  async ownedElsewhere(taskId: string): Promise<string | null> {
    const ownership = this.deps.ownership;
    if (!ownership || ownership.holds(taskId)) return null;
    return (await ownership.liveLease(taskId))?.owner ?? null;
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

  /**
   * Stop taking work; in-flight tasks are aborted and left for resumeUnfinished, and their leases
   * released so another process (or this one restarted) resumes them at once.
   */
  async close(): Promise<void> {
    this.closed = true;
    this.queue.length = 0;
    if (this.recovery) {
      clearInterval(this.recovery.timer);
      await this.recovery.sweep;
    }
    const running = [...this.active.values()];
    for (const r of running) r.ctrl.abort(new ShutdownSignal());
    await Promise.allSettled(running.map((r) => r.done));
    this.detachCommits();
    await this.deps.ownership?.close();
  }

  /** Appended under this process's lease on the task when it holds one. */
  private async appendIfUnchanged(p: TaskProgress, event: NewEvent): Promise<void> {
    const lease = this.deps.ownership?.tokenOf(p.task_id);
    try {
      await this.deps.store.append(p.task_id, [{ ...event, session_id: p.session_id }], {
        expected: p.last_seq,
        ...(lease ? { lease } : {}),
      });
    } catch (err) {
      if (err instanceof ConcurrencyError)
        throw new IllegalStateError(`task ${p.task_id} changed meanwhile; try again`);
      if (err instanceof LeaseLostError && lease) this.deps.ownership!.lost(p.task_id, lease.epoch);
      throw err;
    }
  }

  /** Run the task here if this process may: it claims it first (never from a live owner) when leases are on. */
  private async takeAndEnqueue(taskId: string): Promise<void> {
    if (this.deps.ownership && !(await this.deps.ownership.claim(taskId))) return;
    this.enqueue(taskId);
  }

  /**
   * A person's answer to a waiting task. The instance that gets it takes the task when nobody runs
   * it (a waiting task holds no lease) and records the answer under that lease; when a live owner
   * holds the task it is recorded without a lease and the owner, which follows the log's commits,
   * runs on.
   */
  private async recordResolution(p: TaskProgress, event: NewEvent): Promise<void> {
    const ownership = this.deps.ownership;
    const claimed = ownership ? !ownership.holds(p.task_id) && (await ownership.claim(p.task_id)) : false;
    const event_id = newId('evt');
    this.ownAnswers.add(event_id);
    try {
      await this.appendIfUnchanged(p, { ...event, event_id });
    } catch (err) {
      if (claimed) await ownership!.release(p.task_id);
      throw err;
    } finally {
      this.ownAnswers.delete(event_id);
    }
    if (!ownership || ownership.holds(p.task_id)) this.enqueue(p.task_id);
  }

  /**
   * Commits of every writer, other processes' included: an answer to a task this process holds
   * runs it on; a task that ended elsewhere (cancelled through another instance) stops here.
   */
  private noticeCommits(events: readonly RuntimeEvent[]): void {
    for (const e of events) {
      if (isFinalEventType(e.type)) {
        this.active.get(e.task_id)?.ctrl.abort(new LeaseLostSignal(`task ${e.task_id} ended`));
      } else if (
        (e.type === 'PERMISSION_RESOLVED' || e.type === 'SECRET_PROVIDED') &&
        !this.ownAnswers.has(e.event_id) &&
        this.deps.ownership?.holds(e.task_id)
      ) {
        this.enqueue(e.task_id);
      }
    }
  }

  /** The lease was lost: no more work on the task here, quietly (its new owner carries on). */
  private abandon(taskId: string): void {
    this.again.delete(taskId);
    const queued = this.queue.indexOf(taskId);
    if (queued !== -1) this.queue.splice(queued, 1);
    const running = this.active.get(taskId);
    running?.ctrl.abort(new LeaseLostSignal(`lease on task ${taskId} lost`));
    if (!running) this.idle.emit(taskId);
    this.deps.logger.warn(
      { task_id: taskId, owner: this.deps.ownership?.owner },
      'lease lost: another process runs the task now; stopped working on it here',
    );
  }

  /** What the task's run appends under: undefined without leases, null when the lease is gone. */
  private writerLease(taskId: string): WriterLease | undefined | null {
    const ownership = this.deps.ownership;
    if (!ownership) return undefined;
    const token = ownership.tokenOf(taskId);
    return token ? { token, onLost: () => ownership.lost(taskId, token.epoch) } : null;
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
      const lease = this.writerLease(taskId);
      if (lease === null) continue;
      const ctrl = new AbortController();
      const done = this.deps.loop
        .runTask(taskId, ctrl.signal, lease)
        .then(() => undefined)
        .catch((err: unknown) =>
          this.deps.logger.error({ task_id: taskId, err }, 'task stopped on an unexpected error'),
        )
        .finally(() => {
          this.active.delete(taskId);
          // ended, waiting for a person, or stopped: the lease goes (a waiting task's answer claims it again)
          if (this.again.delete(taskId) && !this.closed) this.enqueue(taskId);
          else if (!this.closed) void this.deps.ownership?.release(taskId);
          this.idle.emit(taskId);
          this.pump();
        });
      this.active.set(taskId, { ctrl, done });
    }
  }
}
