import { EventEmitter } from 'node:events';
import { OnModuleDestroy } from '@nestjs/common';
import {
  AgUiRun,
  ConcurrencyError,
  IdempotencyConflictError,
  IllegalStateError,
  LeaseLostError,
  NewEvent,
  RuntimeEvent,
  NotFoundError,
  OverloadedError,
  PermissionDecision,
  QueueFullError,
  RunSettings,
  SessionTurn,
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
import {
  BACKPRESSURE_RETRY_AFTER_SECONDS,
  BackpressureLimits,
  LoopLoadSource,
  SubmissionPacing,
  UNABSORBED_WAIT_MS,
  holdTasksWhileAnswering,
} from './backpressure';
import { loadProgress } from '../log/checkpoints';
import { TaskOwnership } from './task-ownership';
import { UnfinishedTasks } from './unfinished-tasks';
import { ChildEnd, ChildTaskHost, ChildTaskSpec, endOf } from '../delegation/child-tasks';
import { SESSION_TASKS_READ, sessionTurnsOf } from './session-turns';
import { formAnswer } from './permission-answers';
import { LeaseLostSignal, ReplayRequest, ReplayResult, SecretVault, ShutdownSignal } from '../ports';
import { SessionSecrets } from '../log/session-secrets';
import { mutationIntentOf } from '../discipline/round-policy';
import { TaskProgress, pendingTimer } from '../log/progress';
import { RuntimeLogger } from '../runtime-logger';
import { RuntimeLoop, SUSPENDED_STATUSES } from '../loop/runtime-loop';
import { DueTimers } from './due-timers';
import { TaskEndedElsewhereError, TaskWriter, WriterLease } from '../log/task-writer';
import type { SessionTask } from '../log/task-views';

export interface SubmitOptions {
  idempotency_key?: string | null;
  source: 'api' | 'cli' | 'fork' | 'replay' | 'delegation';
  /**
   * The settings recorded for the task: a replay gives its recording's (null: the recording had
   * none, so none are recorded); otherwise those this process runs tasks under.
   */
  settings?: RunSettings | null;
  /** the session's earlier tasks recorded for the task: a replay gives its recording's; otherwise read from the session */
  session_history?: SessionTurn[];
  /** AG-UI: what the frontend sent with the run, recorded with the task and part of what an idempotency key binds */
  ag_ui?: AgUiRun;
}

export interface ForkOptions {
  /** the orchestrator model the fork runs with (sys_util, or a model of the configured server); the source's when absent */
  model?: string;
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
  /** when submissions are refused and queued tasks held back; never when null */
  backpressure?: BackpressureLimits | null;
  /** the event-loop load backpressure watches; stopped on close */
  loopLoad?: LoopLoadSource | null;
  /**
   * shared with the RuntimeLoop, which paces running tasks with it; built here over
   * `backpressure` and `loopLoad` when not given (then only task starts are held back)
   */
  pacing?: SubmissionPacing | null;
  logger: RuntimeLogger;
  /** where a task's progress is loaded from: its latest snapshot + the events after it; the whole log when null */
  checkpoints?: CheckpointStore | null;
  /** what this process runs a task asking for `budgets` under, recorded in its TASK_RECEIVED */
  runSettings: (budgets: UserTask['budgets']) => RunSettings;
  /** re-runs a recorded task offline as a new task (see replayTask) */
  replay: (sourceTaskId: string, options: ReplayRequest) => Promise<ReplayResult>;
  /** the latest `limit` tasks of a session, oldest first */
  sessionTasks: (sessionId: string, limit: number) => Promise<SessionTask[]>;
  /** why this process cannot run an orchestrator named `model`, or null when it can */
  refuseModel: (model: string) => string | null;
  /**
   * The leases of the tasks this process runs: claimed before a task runs here, carried by every
   * append of its run (fencing). Absent where no other process can write the log (a replay's own
   * log in memory): then every task runs here, unfenced.
   */
  ownership?: TaskOwnership | null;
  /**
   * whether this process fires timers by the wall clock when they come due (false: only fireTimer
   * fires them, as a replay does with the recording's firings)
   */
  wallClockTimers?: boolean;
}

/** task_id of an idempotency key: the same key always names the same task, so two racing submissions collide in the store. */
export const taskIdForKey = (key: string): string => `task_${sha256(`idempotency:${key}`).slice(0, 32)}`;

/** Resolves once this turn of the event loop is done: its I/O callbacks and the promise jobs they started. */
const afterThisTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
/** how soon a due timer whose task was busy is looked at again */
const TIMER_RETRY_MS = 100;
/** how long queued tasks are held back before the event loop is looked at again */
const HOLD_BACK_MS = 50;

/**
 * The runtime's one facade, for HTTP, WebSocket and the CLI: submit returns once
 * TASK_RECEIVED is durable and the task runs on an in-process queue, bounded by
 * the backpressure limits (a refused submission writes nothing); cancel, permission and secret
 * answers, fork, replay, and resume on boot. Stops (in-flight tasks left to
 * resume) when the application shuts down, before the storage closes.
 */
export class RuntimeController implements OnModuleDestroy, ChildTaskHost {
  /**
   * tasks waiting for a run slot, in arrival order, each with when it was queued (the pacing's clock);
   * a Map: a long queue is looked up and taken from often
   */
  private readonly queue = new Map<string, number>();
  /** cancels under way, so a cascade and a request that meet cancel a task once */
  private readonly cancelling = new Map<string, Promise<void>>();
  /**
   * `end`: `handed` once its final event is handed to the store, `committed` once that is durable; only
   * the commit and its wind-down are left then (see slotsTaken)
   */
  private readonly active = new Map<
    string,
    { ctrl: AbortController; done: Promise<void>; end: 'running' | 'handed' | 'committed' }
  >();
  private readonly again = new Set<string>();
  /** running or about to run as a delegation's child */
  private readonly childTasks = new Set<string>();
  private readonly idle = new EventEmitter();
  private readonly unfinished: UnfinishedTasks;
  /** event ids of the answers this process records: it runs those tasks on itself, noticeCommits skips them */
  private readonly ownAnswers = new Set<string>();
  private readonly detachCommits: () => void;
  private readonly detachTimers: () => void;
  /** the timers this process fires when they come due; null when it fires none by the wall clock */
  private readonly dueTimers: DueTimers | null;
  private recovery: { timer: NodeJS.Timeout; sweep: Promise<unknown> | null } | null = null;
  private closed = false;
  /** submissions whose TASK_RECEIVED append has not returned yet */
  private pendingSubmissions = 0;
  private holdBackTimer: NodeJS.Timeout | null = null;
  private readonly pacing: SubmissionPacing;

  constructor(private readonly deps: RuntimeControllerDeps) {
    this.idle.setMaxListeners(0);
    this.pacing = deps.pacing ?? new SubmissionPacing(deps.backpressure ?? null, deps.loopLoad ?? null);
    this.pacing.watchQueue({
      oldestQueuedAt: () => {
        const oldest = this.queue.values().next();
        return oldest.done ? null : oldest.value;
      },
      length: () => this.queue.size,
      submissionsWaiting: () => this.pendingSubmissions,
      allowance: deps.concurrency,
    });
    this.unfinished = new UnfinishedTasks(deps.store);
    deps.ownership?.onLost((taskId) => this.abandon(taskId));
    this.detachCommits = deps.ownership
      ? deps.store.onCommitted((events) => this.noticeCommits(events))
      : () => undefined;
    this.dueTimers =
      deps.wallClockTimers === false
        ? null
        : new DueTimers((taskId) => {
            void this.fireTimer(taskId).catch((err: unknown) =>
              this.deps.logger.warn(
                { task_id: taskId, err },
                'timer not fired; the recovery sweep tries again',
              ),
            );
          });
    this.detachTimers = this.dueTimers
      ? deps.store.onCommitted((events) => this.noticeTimers(events))
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
    const request_hash = sha256(canonicalJson(options.ag_ui ? { task, ag_ui: options.ag_ui } : task));
    const task_id = key ? taskIdForKey(key) : newId('task');
    const session_id = task.session_id ?? newId('sess');
    const settings =
      options.settings === undefined
        ? {
            ...this.deps.runSettings(task.budgets),
            ...(task.timeout_includes_waits ? { timeout_includes_waits: true as const } : {}),
          }
        : options.settings;
    // a key already recorded is answered from its record: it adds no work, so admission has no say
    if (key) {
      const recorded = await this.recordedSubmission(task_id, request_hash);
      if (recorded) return recorded;
    }
    const received = this.admit();
    try {
      // A new session has no history; a named one is read now and recorded, so the task never reads it again.
      const session_history =
        options.session_history ??
        (task.session_id
          ? sessionTurnsOf(await this.deps.sessionTasks(task.session_id, SESSION_TASKS_READ))
          : []);
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
              ...(session_history.length ? { session_history } : {}),
              ...(options.ag_ui ? { ag_ui: options.ag_ui } : {}),
              // the round policy's one decision about the whole task, from its input (or a person), never from what it reads
              ...(settings?.round_policy === 'on'
                ? { mutation_intent: mutationIntentOf(task.input, task.allow_mutation) }
                : {}),
            },
          },
        ],
        { expected: 'no_stream' },
      );
    } catch (err) {
      if (!(err instanceof ConcurrencyError) || !key) throw err;
      const recorded = await this.recordedSubmission(task_id, request_hash);
      if (!recorded) throw err;
      return recorded;
    } finally {
      received();
    }
    this.enqueue(task_id);
    return { task_id, status: 'queued', created: true };
  }

  /**
   * The answer to a submission whose idempotency key names `task_id`, when that task is recorded:
   * refused (IdempotencyConflictError) when it was recorded for a different request; null when the
   * key is not recorded yet.
   */
  private async recordedSubmission(task_id: string, request_hash: string): Promise<SubmitResult | null> {
    const [first] = await this.deps.store.readStream(task_id, { limit: 1 });
    if (first === undefined) return null;
    if (first.type !== 'TASK_RECEIVED' || first.payload.request_hash !== request_hash)
      throw new IdempotencyConflictError(
        `idempotency key already used for a different request (task ${task_id})`,
        { task_id },
      );
    return { task_id, status: (await this.progress(task_id)).status, created: false };
  }

  /**
   * A new task that starts from event `atSequence` of an old one: its history
   * up to there is copied (an ending is not), and the loop continues from that
   * state as it would after a restart. The source stays as it is.
   */
  async fork(sourceTaskId: string, atSequence: number, options: ForkOptions = {}): Promise<SubmitResult> {
    const events = await this.deps.store.readWholeStream(sourceTaskId);
    const [first] = events;
    if (first?.type !== 'TASK_RECEIVED') throw new NotFoundError(`task ${sourceTaskId} not found`);
    if (!Number.isInteger(atSequence) || atSequence < 1 || atSequence > events.length) {
      throw new ValidationError(`sequence must be between 1 and ${events.length}`, {
        field: 'at_sequence',
        last_sequence: events.length,
      });
    }
    const refused = options.model === undefined ? null : this.deps.refuseModel(options.model);
    if (refused !== null) throw new ValidationError(refused, { field: 'model' });
    const received = this.admit();
    const task_id = newId('task');
    const copied = events.slice(1, atSequence).filter((e) => !isFinalEventType(e.type));
    try {
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
              ...(options.model !== undefined ? { model: options.model } : {}),
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
    } finally {
      received();
    }
    this.enqueue(task_id);
    return { task_id, status: 'queued', created: true };
  }

  /** Where the task stands: its latest checkpoint + the events after it (equal to a full fold). */
  progress(taskId: string): Promise<TaskProgress> {
    return loadProgress(this.deps.store, this.deps.checkpoints ?? null, taskId);
  }

  /** Ends the task as cancelled, then its unfinished children (and theirs). */
  cancel(taskId: string): Promise<void> {
    const under = this.cancelling.get(taskId);
    if (under) return under;
    const run = this.cancelOne(taskId).finally(() => this.cancelling.delete(taskId));
    this.cancelling.set(taskId, run);
    return run;
  }

  private async cancelOne(taskId: string): Promise<void> {
    const p = await this.progress(taskId);
    if (p.final) {
      if (p.status === 'cancelled') return this.cancelChildren(p);
      throw new IllegalStateError(`task ${taskId} already ended (${p.status})`);
    }
    const running = this.active.get(taskId);
    this.queue.delete(taskId);
    this.again.delete(taskId);
    if (running) {
      running.ctrl.abort();
      await running.done;
    }
    const writer = await TaskWriter.open(this.deps.store, taskId);
    if (!writer.progress.final)
      await this.deps.loop
        .end(writer, { stop_reason: 'cancelled', detail: 'cancelled by request' }, null)
        .catch((err: unknown) => {
          if (!(err instanceof TaskEndedElsewhereError)) throw err;
        });
    await this.cancelChildren(writer.progress);
  }

  /** A task that ended leaves no child running: each unfinished one is cancelled, with its own children. */
  private async cancelChildren(p: TaskProgress): Promise<void> {
    const open = [...p.children.values()].filter((c) => !c.ended).map((c) => c.started.child_task_id);
    await Promise.all(
      open.map((id) =>
        this.cancel(id).catch((err: unknown) => {
          // a child that ended on its own meanwhile is no longer anyone's to cancel
          if (!(err instanceof IllegalStateError || err instanceof NotFoundError)) throw err;
        }),
      ),
    );
  }

  /**
   * A delegation's child: its TASK_RECEIVED unless the stream exists (a
   * resumed parent starts the child it started before), then it runs at once,
   * outside the task concurrency: its parent's plan step holds the slot, and
   * the step concurrency bounds how many children a plan runs together.
   */
  async startChild(spec: ChildTaskSpec): Promise<void> {
    if ((await this.deps.store.streamVersion(spec.task_id)) === 0) {
      const childSettings = this.deps.runSettings(spec.budgets);
      try {
        await this.deps.store.append(
          spec.task_id,
          [
            {
              type: 'TASK_RECEIVED',
              session_id: spec.session_id,
              payload: {
                input: spec.input,
                session_id: spec.session_id,
                accept_checks: spec.accept_checks,
                budgets: spec.budgets,
                idempotency_key: null,
                request_hash: null,
                source: 'delegation',
                forked_from: null,
                settings: childSettings,
                ...(childSettings.round_policy === 'on'
                  ? { mutation_intent: mutationIntentOf(spec.input, undefined) }
                  : {}),
                parent_task_id: spec.parent_task_id,
                root_task_id: spec.root_task_id,
                depth: spec.depth,
                agent: spec.agent,
              },
            },
          ],
          { expected: 'no_stream' },
        );
      } catch (err) {
        if (!(err instanceof ConcurrencyError)) throw err;
      }
    }
    if (!this.active.has(spec.task_id)) this.enqueue(spec.task_id, { child: true });
  }

  /** The child's end from its final event: read from the log, or awaited as it commits. */
  childEnded(childTaskId: string, signal: AbortSignal): Promise<ChildEnd | null> {
    return new Promise<ChildEnd | null>((resolve, reject) => {
      let settled = false;
      const finish = (end: ChildEnd | null) => {
        if (settled) return;
        settled = true;
        detach();
        signal.removeEventListener('abort', onAbort);
        resolve(end);
      };
      const onAbort = () => finish(null);
      // listening before reading: an end committed in between is seen by one or the other
      const detach = this.deps.store.onCommitted((events) => {
        for (const e of events) if (e.task_id === childTaskId && isFinalEventType(e.type)) finish(endOf(e));
      });
      signal.addEventListener('abort', onAbort, { once: true });
      if (signal.aborted) return onAbort();
      this.deps.store
        .streamVersion(childTaskId)
        .then((version) =>
          version === 0 ? [] : this.deps.store.readStream(childTaskId, { after_seq: version - 1 }),
        )
        .then(([last]) => {
          if (last && isFinalEventType(last.type)) finish(endOf(last));
        })
        .catch((err: unknown) => {
          if (settled) return;
          settled = true;
          detach();
          signal.removeEventListener('abort', onAbort);
          reject(err as Error);
        });
    });
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
    await this.recordResolution(p, {
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
    // answers posted together race to the append: only the one it accepts may reach the vault
    await this.recordResolution(
      p,
      {
        type: 'SECRET_PROVIDED',
        payload: {
          request_id: requestId,
          call_id: pending.call_id,
          secret_name: pending.secret_name,
          fingerprint: this.deps.secrets.fingerprintOf(secret),
        },
      },
      () => {
        this.deps.vault.put(taskId, pending.call_id, pending.secret_name, secret);
        this.deps.secrets.remember(p.session_id, secret);
      },
    );
  }

  /**
   * Every task the log shows unfinished, not waiting for a person and not run by a live owner is
   * claimed and queued again (`force`: taken even from a live owner, bumping its lease's epoch).
   */
  async resumeUnfinished(options: { force?: boolean } = {}): Promise<string[]> {
    const candidates = (await this.unfinished.list()).filter(
      (taskId) => !this.active.has(taskId) && !this.queue.has(taskId),
    );
    const ownership = this.deps.ownership;
    const free = ownership && !options.force ? new Set(await ownership.claimable(candidates)) : null;
    // every marker is written before any task runs: a resumed parent starts its children itself
    const resumed: { taskId: string; child: boolean }[] = [];
    for (const taskId of candidates) {
      if (this.closed) break;
      if (free && !free.has(taskId)) continue;
      const p = await this.progress(taskId);
      if (p.final || SUSPENDED_STATUSES.includes(p.status)) continue;
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
      resumed.push({ taskId, child: p.parent_task_id !== null });
    }
    for (const { taskId, child } of resumed) this.enqueue(taskId, { child });
    if (this.dueTimers && !this.closed)
      for (const t of await this.unfinished.pendingTimers()) this.dueTimers.arm(t.task_id, t.due_at);
    return resumed.map((r) => r.taskId);
  }

  /**
   * Fires the timer the task waits for once it is due (`early`: now, due or not; a replay fires the
   * recording's firings so). Whichever instance gets here first records TIMER_FIRED; the append
   * expects the sequence the task was read at, so a second firing anywhere is refused and nothing
   * fires twice. False when there was nothing to fire here.
   */
  async fireTimer(taskId: string, options: { early?: boolean } = {}): Promise<boolean> {
    const p = await this.progress(taskId);
    const timer = pendingTimer(p);
    if (!timer || p.final) return false;
    if (!options.early && Date.parse(timer.due_at) > Date.now()) {
      this.dueTimers?.arm(taskId, timer.due_at);
      return false;
    }
    // a run still winding down (here, or under another instance's live lease) appends on: fire after it
    if (this.active.has(taskId) || (await this.ownedElsewhere(taskId)) !== null) {
      this.dueTimers?.arm(taskId, new Date(Date.now() + TIMER_RETRY_MS).toISOString());
      return false;
    }
    try {
      await this.recordResolution(p, {
        type: 'TIMER_FIRED',
        payload: { timer_id: timer.timer_id, due_at: timer.due_at },
      });
      return true;
    } catch (err) {
      // fired by another instance (or this one) meanwhile, or its task taken over: not ours to fire
      if (!(err instanceof IllegalStateError || err instanceof LeaseLostError)) throw err;
      // the task moved on meanwhile: looked at again shortly (fired by then, it costs one read)
      this.dueTimers?.arm(taskId, new Date(Date.now() + TIMER_RETRY_MS).toISOString());
      return false;
    }
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
    let ended: TaskProgress | null = null;
    while (this.active.has(taskId) || this.queue.has(taskId)) {
      ended = await new Promise<TaskProgress | null>((resolve) =>
        this.idle.once(taskId, (p?: TaskProgress | null) => resolve(p ?? null)),
      );
    }
    // ended here, with every event of its writer's fold in the log: that fold is the log's, and nothing
    // follows a final event (the same object for every caller: read it, do not change it)
    return ended ?? this.progress(taskId);
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
    this.queue.clear();
    if (this.recovery) {
      clearInterval(this.recovery.timer);
      await this.recovery.sweep;
    }
    if (this.holdBackTimer) clearTimeout(this.holdBackTimer);
    this.dueTimers?.stop();
    this.detachTimers();
    this.pacing.load?.stop();
    const running = [...this.active.values()];
    for (const r of running) r.ctrl.abort(new ShutdownSignal());
    await Promise.allSettled(running.map((r) => r.done));
    this.detachCommits();
    await this.deps.ownership?.close();
  }

  /**
   * Admits a new task's TASK_RECEIVED write, or refuses it before anything is
   * written (refuseWhenSaturated). Admitted, it counts as a pending submission
   * and running tasks give it the loop (holdTasksWhileAnswering) until the
   * returned release, called once the write settled.
   */
  private admit(): () => void {
    this.refuseWhenSaturated();
    this.pendingSubmissions++;
    const answered = holdTasksWhileAnswering();
    return () => {
      this.pendingSubmissions--;
      answered();
    };
  }

  /** Refuses a new task, before anything is written, when the queue is full, too many submissions wait for the store, or the loop is saturated while the queue is not absorbed. */
  private refuseWhenSaturated(): void {
    const limits = this.deps.backpressure;
    if (!limits) return;
    this.pacing.submitted();
    const waiting = this.queue.size + this.pendingSubmissions;
    if (waiting >= limits.maxQueued)
      throw new QueueFullError(
        `${waiting} tasks already wait to run (at most ${limits.maxQueued}); retry later`,
        BACKPRESSURE_RETRY_AFTER_SECONDS,
        { queued: waiting, max_queued: limits.maxQueued },
      );
    if (this.pendingSubmissions >= limits.maxPendingSubmissions)
      throw new OverloadedError(
        `${this.pendingSubmissions} submissions already wait for the store (at most ${limits.maxPendingSubmissions}); retry later`,
        BACKPRESSURE_RETRY_AFTER_SECONDS,
        {
          pending_submissions: this.pendingSubmissions,
          max_pending_submissions: limits.maxPendingSubmissions,
        },
      );
    const load = this.loopOverloaded();
    if (load && this.queueUnabsorbed())
      throw new OverloadedError(
        `the server is saturated (event loop ${load.reason}); retry later`,
        BACKPRESSURE_RETRY_AFTER_SECONDS,
        load.details,
      );
  }

  /**
   * Whether the queue is not being absorbed: its oldest task has waited maxStartWaitMs (UNABSORBED_WAIT_MS
   * without that bound). Only then does a saturated loop refuse a submission: a loop busy running
   * the tasks it took is doing the work it exists for, and a burst it will absorb is accepted.
   */
  private queueUnabsorbed(): boolean {
    const bound = this.deps.backpressure?.maxStartWaitMs || UNABSORBED_WAIT_MS;
    return this.pacing.oldestWaitMs() >= bound;
  }

  /** What says the event loop is loaded beyond the limits, or null when it is not (or not watched). */
  private loopOverloaded(): { reason: string; details: Record<string, number> } | null {
    const limits = this.deps.backpressure;
    const loop = this.pacing.load;
    if (!limits || !loop) return null;
    if (limits.maxLoopDelayMs > 0) {
      const delay = Math.round(loop.delayMs());
      if (delay > limits.maxLoopDelayMs)
        return {
          reason: `delay ${delay} ms, at most ${limits.maxLoopDelayMs}`,
          details: { loop_delay_ms: delay, max_loop_delay_ms: limits.maxLoopDelayMs },
        };
    }
    if (limits.maxLoopUtilization < 1) {
      const utilization = Math.round(loop.utilization() * 100) / 100;
      if (utilization > limits.maxLoopUtilization)
        return {
          reason: `busy ${Math.round(utilization * 100)}% of the time, at most ${Math.round(limits.maxLoopUtilization * 100)}%`,
          details: { loop_utilization: utilization, max_loop_utilization: limits.maxLoopUtilization },
        };
    }
    return null;
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

  /**
   * A person's answer to a waiting task. The instance that gets it takes the task when nobody runs
   * it (a waiting task holds no lease) and records the answer under that lease; when a live owner
   * holds the task it is recorded without a lease and the owner, which follows the log's commits,
   * runs on.
   */
  /** `accepted` runs once the append has made this answer the one recorded, before the task runs on. */
  private async recordResolution(p: TaskProgress, event: NewEvent, accepted?: () => void): Promise<void> {
    const ownership = this.deps.ownership;
    const claimed =
      ownership && !this.closed ? !ownership.holds(p.task_id) && (await ownership.claim(p.task_id)) : false;
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
    accepted?.();
    if (!ownership || ownership.holds(p.task_id))
      this.enqueue(p.task_id, { child: p.parent_task_id !== null });
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
        (e.type === 'PERMISSION_RESOLVED' || e.type === 'SECRET_PROVIDED' || e.type === 'TIMER_FIRED') &&
        !this.ownAnswers.has(e.event_id) &&
        this.deps.ownership?.holds(e.task_id)
      ) {
        this.enqueue(e.task_id);
      }
    }
  }

  /** Timers set anywhere are armed here: whichever instance sees one due first fires it. */
  private noticeTimers(events: readonly RuntimeEvent[]): void {
    for (const e of events) {
      if (e.type === 'TIMER_SET') this.dueTimers?.arm(e.task_id, e.payload.due_at);
      else if (e.type === 'TIMER_FIRED' || isFinalEventType(e.type)) this.dueTimers?.drop(e.task_id);
    }
  }

  /** The lease was lost: no more work on the task here, quietly (its new owner carries on). */
  private abandon(taskId: string): void {
    this.again.delete(taskId);
    this.queue.delete(taskId);
    const running = this.active.get(taskId);
    running?.ctrl.abort(new LeaseLostSignal(`lease on task ${taskId} lost`));
    if (!running) this.idle.emit(taskId);
    this.deps.logger.warn(
      { task_id: taskId, owner: this.deps.ownership?.owner },
      'lease lost: another process runs the task now; stopped working on it here',
    );
  }

  /**
   * A task is claimed when it starts, not when it is queued: submission writes only its
   * TASK_RECEIVED, and a task waiting here unclaimed may be taken by another instance, whose live
   * lease then makes this claim fail (null: not run here). Undefined without leases.
   */
  private async claimToRun(taskId: string): Promise<WriterLease | undefined | null> {
    const ownership = this.deps.ownership;
    if (ownership && !ownership.holds(taskId) && !(await ownership.claim(taskId))) return null;
    return this.writerLease(taskId);
  }

  /** What the task's run appends under: undefined without leases, null when the lease is gone. */
  private writerLease(taskId: string): WriterLease | undefined | null {
    const ownership = this.deps.ownership;
    if (!ownership) return undefined;
    const token = ownership.tokenOf(taskId);
    return token ? { token, onLost: () => ownership.lost(taskId, token.epoch) } : null;
  }

  /** A child runs outside the task concurrency (see startChild); any other task waits for a slot. */
  private enqueue(taskId: string, options: { child?: boolean } = {}): void {
    if (this.closed) return;
    if (options.child) this.childTasks.add(taskId);
    if (this.active.has(taskId)) {
      this.again.add(taskId);
      return;
    }
    if (this.childTasks.has(taskId)) return this.start(taskId);
    if (!this.queue.has(taskId)) this.queue.set(taskId, this.pacing.now());
    this.pump();
  }

  /**
   * Tasks holding a slot of the task concurrency. Children run outside it (their parent's step holds
   * one), and so does a task whose final event is committed: the next one starts while it cancels its
   * children and lets its lease go. A task whose final event is only handed to the store computes
   * nothing more either, and the next one may start while that event commits (memory's deduplication
   * sees the handed writes: EventStore.handOver), but for at most `concurrency - 1` such tasks at once:
   * - so one slot runs tasks strictly in turn, each reading what the last one wrote (its memory);
   * - so a store that stalls holds at most twice the concurrency less one in running or handed tasks
   *   (children and tasks winding down aside), not every queued one.
   */
  private slotsTaken(): number {
    let running = 0;
    let handed = 0;
    for (const [id, task] of this.active) {
      if (this.childTasks.has(id) || task.end === 'committed') continue;
      if (task.end === 'handed') handed++;
      else running++;
    }
    return running + Math.max(0, handed - (this.deps.concurrency - 1));
  }

  private ended(taskId: string, stage: 'handed' | 'committed'): void {
    const task = this.active.get(taskId);
    if (!task || task.end === 'committed') return;
    task.end = stage;
    this.pump();
  }

  private pump(): void {
    while (!this.closed && this.slotsTaken() < this.deps.concurrency && this.queue.size > 0) {
      // one task always runs, so the queue drains
      if (this.active.size > 0 && this.startsHeldBack()) {
        this.holdBack();
        return;
      }
      const next = this.queue.keys().next().value!;
      this.queue.delete(next);
      this.start(next, { afterThisTurn: true });
    }
  }

  /**
   * Whether a queued task waits before it starts: waiting submissions and the running tasks get the
   * loop first. It waits while submissions wait and the loop is busier than the start limit (or
   * saturated), since a task started then takes the time their answers need; with no submission
   * waiting, tasks start up to the run slots however busy the loop is with their work.
   */
  private startsHeldBack(): boolean {
    return (
      this.pacing.submissionsNeedTheLoop() ||
      (this.loopOverloaded() !== null && this.pacing.submissionsWaiting())
    );
  }

  /**
   * The task takes its slot now. A queued task's work (the lease claim, its first reads, the
   * beginning of its run) waits `afterThisTurn` of the event loop, so the answer to the submission
   * that queued it is written first; stopped meanwhile (cancelled, shut down), it does not start. A
   * delegation's child starts at once, in step with its parent (a replay depends on that order).
   */
  private start(taskId: string, options: { afterThisTurn?: boolean } = {}): void {
    const ctrl = new AbortController();
    let ended: TaskProgress | null = null;
    const claimed = options.afterThisTurn
      ? afterThisTurn().then(() => (ctrl.signal.aborted ? null : this.claimToRun(taskId)))
      : this.claimToRun(taskId);
    const done = claimed
      .then(async (lease) => {
        // stopped before it started, or another process runs it (it claimed the task while it waited here)
        if (lease === null) return;
        const run = await this.deps.loop.runTask(taskId, ctrl.signal, lease, {
          handed: () => this.ended(taskId, 'handed'),
          committed: () => this.ended(taskId, 'committed'),
        });
        if (run.progress.final && run.inLog) ended = run.progress;
        // however it ended (a deadline, a guard, a cancel), a task leaves no child running
        if (run.progress.final) await this.cancelChildren(run.progress);
      })
      .catch((err: unknown) =>
        this.deps.logger.error({ task_id: taskId, err }, 'task stopped on an unexpected error'),
      )
      .finally(() => {
        this.active.delete(taskId);
        if (this.again.delete(taskId) && !this.closed) this.enqueue(taskId);
        else {
          this.childTasks.delete(taskId);
          // ended, waiting for a person, or stopped: the lease goes (a waiting task's answer claims it again)
          if (!this.closed) void this.deps.ownership?.release(taskId);
        }
        this.idle.emit(taskId, ended);
        this.pump();
      });
    this.active.set(taskId, { ctrl, done, end: 'running' });
  }

  private holdBack(): void {
    if (this.holdBackTimer) return;
    this.holdBackTimer = setTimeout(() => {
      this.holdBackTimer = null;
      this.pump();
    }, HOLD_BACK_MS);
    this.holdBackTimer.unref();
  }
}
