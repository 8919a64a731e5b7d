import { OnModuleDestroy } from '@nestjs/common';
import {
  AgUiRun,
  ConcurrencyError,
  EventPayload,
  IdempotencyConflictError,
  IllegalStateError,
  NewEvent,
  NotFoundError,
  OnBusy,
  PermissionDecision,
  RuntimeEvent,
  SessionBusyError,
  RunSettings,
  SessionBudget,
  SessionBudgetSetting,
  SessionTurn,
  TaskStatus,
  UserTask,
  ValidationError,
  canonicalJson,
  isFinalEventType,
  newId,
  refuseErasedContent,
  sha256,
} from '@runledger/contracts';
import { EventStore } from '@runledger/event-store';
import { CheckpointStore } from '@runledger/state-store';
import { loadProgress } from '../log/checkpoints';
import { TaskOwnership, ownedElsewhere } from './task-ownership';
import { ChildEnd, ChildTaskHost, ChildTaskSpec, endOf } from '../delegation/child-tasks';
import { AgentCatalog } from '../delegation/agent-catalog';
import { RemoteAgents } from '../delegation/remote-agents';
import { cancelRemoteChild } from '../delegation/remote-delegation';
import { SESSION_TASKS_READ, sessionTurnsOf } from './session-turns';
import { sessionBudgetFor } from './session-budget';
import { SessionQueue, sessionStream } from './session-queue';
import type { SessionTask } from '../log/task-views';
import { formAnswer } from './permission-answers';
import { SecretVault } from '../ports';
import { SessionSecrets } from '../log/session-secrets';
import { mutationIntentOf } from '../loop/round-policy';
import { TaskProgress } from '../log/progress';
import { RuntimeLogger } from '../runtime-logger';
import { RuntimeLoop, SUSPENDED_STATUSES } from '../loop/runtime-loop';
import { TaskEndedElsewhereError, TaskWriter } from '../log/task-writer';
import { Admission } from './admission';
import { Recovery } from './recovery';
import { RunQueue } from './run-queue';
import { TaskAnswers } from './task-answers';
import { SignalSent, SignalToSend, sendSignal } from './task-signals';

/** What a replay is asked to do (see replayTask). */
export interface ReplayRequest {
  /** write the replayed task (ended, with its stop reason) to the live log; by default nothing is written there */
  save?: boolean;
}

export interface ReplayResult {
  task_id: string;
  progress: TaskProgress;
  /** the replayed task's events, as its own log holds them (saved: as the live log does) */
  events: RuntimeEvent[];
  /** whether they were written to the live log */
  saved: boolean;
}

export interface SubmitOptions {
  idempotency_key?: string | null;
  source: 'api' | 'cli' | 'fork' | 'replay' | 'delegation' | 'schedule' | 'hook';
  /**
   * The settings recorded for the task: a replay gives its recording's (null: the recording had
   * none, so none are recorded); otherwise those this process runs tasks under.
   */
  settings?: RunSettings | null;
  /** the session's earlier tasks recorded for the task: a replay gives its recording's; otherwise read from the session */
  session_history?: SessionTurn[];
  /** the session budget recorded for the task: a replay gives its recording's (null: none); otherwise the session's */
  session_budget?: SessionBudget | null;
  /** AG-UI: what the frontend sent with the run, recorded with the task and part of what an idempotency key binds */
  ag_ui?: AgUiRun;
  /**
   * a replay of a task its recording queued behind another of its session: received queued the same,
   * its turn begins as the recording's did (beginRecordedTurn); otherwise the session decides
   */
  queued?: { behind: string; on_busy: OnBusy };
}

/** What the client answered for a tool it offered: the tool's output, or why it did not run. */
export type ClientToolAnswer = { ok: true; output: unknown } | { ok: false; error: string };

export interface ForkOptions {
  /** the orchestrator model the fork runs with (sys_util, or a model of the configured server); the source's when absent */
  model?: string;
  /**
   * round policy: a person allows the fork to change things whatever its input says, recorded as
   * their decision in its TASK_RECEIVED (only where the source ran with the round policy on)
   */
  allow_mutation?: boolean;
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
  logger: RuntimeLogger;
  /** the tasks this process runs */
  runs: RunQueue;
  /** whether a new task is taken */
  admission: Admission;
  /** what this process appends to a task from outside its run */
  answers: TaskAnswers;
  /** resume on boot, the recovery sweep and the timers */
  recovery: Recovery;
  /** the session's strategy for a message that arrives while a task of it is unfinished, and its queued tasks */
  sessions: SessionQueue;
  /** the latest `limit` tasks of a session, oldest first */
  sessionTasks: (sessionId: string, limit: number) => Promise<SessionTask[]>;
  /** where a task's progress is loaded from: its latest snapshot + the events after it; the whole log when null */
  checkpoints?: CheckpointStore | null;
  /** what this process runs a task asking for `budgets` under, recorded in its TASK_RECEIVED */
  runSettings: (budgets: UserTask['budgets']) => RunSettings;
  /** re-runs a recorded task offline as a new task (see replayTask) */
  replay: (sourceTaskId: string, options: ReplayRequest) => Promise<ReplayResult>;
  /** why this process cannot run an orchestrator named `model`, or null when it can */
  refuseModel: (model: string) => string | null;
  /**
   * The leases of the tasks this process runs: claimed before a task runs here, carried by every
   * append of its run (fencing). Absent where no other process can write the log (a replay's own
   * log in memory): then every task runs here, unfenced.
   */
  ownership?: TaskOwnership | null;
  /** where the remote tasks of delegations to remote agents are cancelled; none when absent */
  remoteChildren?: { agents: AgentCatalog; remote: RemoteAgents };
}

/** how often a waiting task is looked at while a caller waits for it to move on */
const MOVED_ON_POLL_MS = 100;
/** how often a caller waiting for a queued task's turn looks whether the tasks before it ended */
const TURN_LOOK_MS = 1_000;
/** how long a task that moved on without being queued here is watched before it counts as run elsewhere */
const MOVED_ON_ELSEWHERE_MS = 2_000;

/** Submissions of these sources (messages from outside, a webhook's too) follow their session's strategy when a task of it is unfinished. */
const PERSON_SOURCES: ReadonlySet<SubmitOptions['source']> = new Set(['api', 'cli', 'hook']);

/** Where a received task stands in its session. */
interface SessionTurnOf {
  history: SessionTurn[] | null;
  queued_behind?: string;
  on_busy?: OnBusy;
}

/** task_id of an idempotency key: the same key always names the same task, so two racing submissions collide in the store. */
export const taskIdForKey = (key: string): string => `task_${sha256(`idempotency:${key}`).slice(0, 32)}`;

/**
 * The runtime's one facade, for HTTP, WebSocket and the CLI: submit returns once
 * TASK_RECEIVED is durable and the task runs on the RunQueue, as Admission allows (a refused
 * submission writes nothing); cancel, permission and secret answers (TaskAnswers), fork, replay,
 * and resume on boot (Recovery). Stops (in-flight tasks left to resume) when the application
 * shuts down, before the storage closes.
 */
export class RuntimeController implements OnModuleDestroy, ChildTaskHost {
  /** cancels under way, so a cascade and a request that meet cancel a task once */
  private readonly cancelling = new Map<string, Promise<void>>();

  constructor(private readonly deps: RuntimeControllerDeps) {
    deps.runs.onFinal((p) => this.cancelChildren(p));
    deps.sessions.cancelsWith((taskId) => this.cancel(taskId));
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
    const receive = (turn: SessionTurnOf) =>
      this.receive(task, options, { task_id, session_id, key, request_hash, settings }, turn);
    // a message for a session follows its strategy when a task of the session is unfinished (double-texting)
    const sessionId = task.session_id;
    if (options.queued)
      return receive({
        history: null,
        queued_behind: options.queued.behind,
        on_busy: options.queued.on_busy,
      });
    if (
      sessionId === undefined ||
      options.session_history !== undefined ||
      !PERSON_SOURCES.has(options.source)
    )
      return receive({ history: options.session_history ?? null });
    const sessions = this.deps.sessions;
    return sessions.one(sessionId, async () => {
      const sessionSettings = await sessions.settings(sessionId);
      const on_busy = sessions.strategyOf(task.on_busy, sessionSettings);
      const busy = await sessions.unfinished(sessionId);
      const last = busy[busy.length - 1];
      if (last === undefined) return receive({ history: await sessions.history(sessionId, sessionSettings) });
      if (on_busy === 'reject')
        throw new SessionBusyError(
          `session ${sessionId} has an unfinished task (${last}); its strategy is reject`,
          { session_id: sessionId, task_id: last, unfinished: busy },
        );
      const result = await receive({ history: null, queued_behind: last, on_busy });
      if (!result.created) return result;
      // a crash before it is applied leaves it to recovery, which applies what the log does not show done
      await sessions.applyStrategy(task_id, busy);
      sessions.hold(task_id, last);
      return result;
    });
  }

  /**
   * TASK_RECEIVED, then the task runs (or, queued behind another task of its session, waits for its
   * turn). `turn.history`: the session's history it is shown (null: a new session, or a task that
   * reads it when its turn begins).
   */
  private async receive(
    task: UserTask,
    options: SubmitOptions,
    ids: {
      task_id: string;
      session_id: string;
      key: string | null;
      request_hash: string;
      settings: RunSettings | null;
    },
    turn: SessionTurnOf,
  ): Promise<SubmitResult> {
    const { task_id, session_id, key, request_hash, settings } = ids;
    const received = this.deps.admission.admit();
    try {
      // A new session has no history; a named one is read now and recorded, so the task never reads it
      // again (a task queued behind another of its session reads it when its turn begins)
      const readsHistory = turn.history === null && !turn.queued_behind;
      const earlier =
        task.session_id && (readsHistory || options.session_budget === undefined)
          ? await this.deps.sessionTasks(task.session_id, SESSION_TASKS_READ)
          : [];
      const session_history = turn.history ?? (readsHistory ? sessionTurnsOf(earlier) : []);
      // so is the session's budget, with what the session had spent by now
      const session_budget =
        options.session_budget !== undefined
          ? options.session_budget
          : await sessionBudgetFor({
              task_id,
              asked: task.budgets ?? {},
              earlier,
              received: (id) => this.receivedOf(id),
              setting: task.session_id ? await this.sessionSetting(task.session_id) : null,
            });
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
              ...(session_budget ? { session_budget } : {}),
              ...(options.ag_ui ? { ag_ui: options.ag_ui } : {}),
              // the round policy's one decision about the whole task, from its input (or a person), never from what it reads
              ...(settings?.round_policy === 'on'
                ? { mutation_intent: mutationIntentOf(task.input, task.allow_mutation) }
                : {}),
              ...(turn.queued_behind ? { queued_behind: turn.queued_behind, on_busy: turn.on_busy } : {}),
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
    if (!turn.queued_behind) this.deps.runs.enqueue(task_id);
    return { task_id, status: 'queued', created: true };
  }

  /**
   * Sets the session's own budget across its tasks (SESSION_BUDGET_SET in its stream): tasks
   * received from now on run under it, before any limit a task named. Refused (ValidationError)
   * with nothing written for a bad session id or setting.
   */
  async setSessionBudget(sessionId: string, setting: SessionBudgetSetting): Promise<SessionBudget> {
    const id = UserTask.shape.session_id.unwrap().safeParse(sessionId);
    if (!id.success)
      throw new ValidationError(`invalid session_id: ${id.error.issues[0].message}`, id.error.issues);
    const parsed = SessionBudgetSetting.safeParse(setting);
    if (!parsed.success)
      throw new ValidationError(
        `invalid session budget: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'body'}: ${i.message}`).join('; ')}`,
        parsed.error.issues,
      );
    await this.deps.store.append(
      sessionStream(sessionId),
      [
        {
          type: 'SESSION_BUDGET_SET',
          session_id: sessionId,
          payload: {
            max_tokens: parsed.data.max_tokens ?? null,
            max_cost_usd: parsed.data.max_cost_usd ?? null,
          },
        },
      ],
      { expected: 'any' },
    );
    return (await this.sessionBudget(sessionId))!;
  }

  /** The session's budget as a task received now would record it; null when the session has none. */
  async sessionBudget(sessionId: string): Promise<SessionBudget | null> {
    return sessionBudgetFor({
      task_id: '',
      asked: {},
      earlier: await this.deps.sessionTasks(sessionId, SESSION_TASKS_READ),
      received: (id) => this.receivedOf(id),
      setting: await this.sessionSetting(sessionId),
    });
  }

  private async sessionSetting(sessionId: string) {
    return (await this.deps.sessions.settings(sessionId)).budget;
  }

  /** What an earlier task of a session recorded when it was received (null: not a task). */
  private async receivedOf(taskId: string): Promise<EventPayload<'TASK_RECEIVED'> | null> {
    const [first] = await this.deps.store.readStream(taskId, { limit: 1 });
    return first?.type === 'TASK_RECEIVED' ? first.payload : null;
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
    refuseErasedContent(sourceTaskId, events, 'a fork cannot continue from it');
    if (!Number.isInteger(atSequence) || atSequence < 1 || atSequence > events.length) {
      throw new ValidationError(`sequence must be between 1 and ${events.length}`, {
        field: 'at_sequence',
        last_sequence: events.length,
      });
    }
    const refused = options.model === undefined ? null : this.deps.refuseModel(options.model);
    if (refused !== null) throw new ValidationError(refused, { field: 'model' });
    const received = this.deps.admission.admit();
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
              ...(options.allow_mutation === true && first.payload.mutation_intent
                ? { mutation_intent: mutationIntentOf(first.payload.input, true) }
                : {}),
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
    this.deps.runs.enqueue(task_id);
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
    await this.deps.runs.stop(taskId);
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
    const unfinished = [...p.children.values()].filter((c) => !c.ended);
    const remote = this.deps.remoteChildren;
    await Promise.all([
      ...unfinished
        .filter((c) => !c.started.remote)
        .map((c) =>
          this.cancel(c.started.child_task_id).catch((err: unknown) => {
            // a child that ended on its own meanwhile is no longer anyone's to cancel
            if (!(err instanceof IllegalStateError || err instanceof NotFoundError)) throw err;
          }),
        ),
      ...unfinished
        .filter((c) => c.started.remote && remote)
        .map((c) =>
          cancelRemoteChild(remote!.remote, remote!.agents, c).catch((err: unknown) =>
            // the parent is cancelled either way; the remote agent keeps what it could not be told
            this.deps.logger.warn(
              { err, task_id: p.task_id },
              'the remote task of a delegation was not cancelled',
            ),
          ),
        ),
    ]);
  }

  /**
   * A delegation's child: its TASK_RECEIVED unless the stream exists (a
   * resumed parent starts the child it started before), then it runs at once,
   * outside the task concurrency: its parent's plan step holds the slot, and
   * the step concurrency bounds how many children a plan runs together.
   */
  async startChild(spec: ChildTaskSpec): Promise<void> {
    if ((await this.deps.store.streamVersion(spec.task_id)) === 0) {
      const processSettings = this.deps.runSettings(spec.budgets);
      // an agent's profile may turn the round policy on or off for its own tasks
      const policy = spec.agent.round_policy ?? processSettings.round_policy ?? 'off';
      const { round_policy: _processPolicy, ...rest } = processSettings;
      const childSettings: RunSettings = policy === 'on' ? { ...rest, round_policy: 'on' } : rest;
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
    if (!this.deps.runs.isRunning(spec.task_id)) this.deps.runs.enqueue(spec.task_id, { child: true });
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
    await this.deps.answers.recordResolution(p, {
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
    await this.deps.answers.recordResolution(
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
   * The client's result for a call to one of the tools it offered: recorded as the call's outcome
   * (TOOL_COMPLETED or TOOL_FAILED naming the request), and the task runs on once no other call
   * waits for the client.
   */
  async provideClientToolResult(taskId: string, requestId: string, answer: ClientToolAnswer): Promise<void> {
    const p = await this.progress(taskId);
    const pending = p.pendingClientTools.get(requestId);
    if (!pending || p.final)
      throw new IllegalStateError(`client tool request ${requestId} of task ${taskId} is not pending`);
    const { call_id, tool } = pending;
    // the call lasted from its question to this answer: the client ran it meanwhile
    const asked = (await this.deps.store.readWholeStream(taskId)).find(
      (e) => e.type === 'TASK_AWAITING_CLIENT_TOOL' && e.payload.request_id === requestId,
    );
    const duration_ms = asked ? Math.max(0, Date.now() - Date.parse(asked.created_at)) : 0;
    await this.deps.answers.recordResolution(
      p,
      answer.ok
        ? {
            type: 'TOOL_COMPLETED',
            payload: {
              call_id,
              tool,
              result: { tool, ok: true, output: answer.output, error: null, metadata: {} },
              duration_ms,
              request_id: requestId,
            },
          }
        : {
            type: 'TOOL_FAILED',
            payload: {
              call_id,
              tool,
              result: null,
              error: answer.error,
              error_kind: 'tool_error',
              duration_ms,
              request_id: requestId,
            },
          },
    );
  }

  /** The session's strategy for a message that arrives while a task of it is unfinished (null: none set, enqueue applies). */
  async sessionStrategy(sessionId: string): Promise<OnBusy | null> {
    return (await this.deps.sessions.settings(sessionId)).on_busy;
  }

  /** Sets the session's strategy (SESSION_CONFIGURED in its stream `session:<id>`), from its next message on. */
  configureSession(sessionId: string, on_busy: OnBusy): Promise<void> {
    return this.deps.sessions.configure(sessionId, on_busy);
  }

  /**
   * The turn of a task queued behind another of its session begins as recorded (a replay gives its
   * recording's SESSION_TURN_BEGAN), and the task runs.
   */
  async beginRecordedTurn(taskId: string, turn: EventPayload<'SESSION_TURN_BEGAN'>): Promise<void> {
    const p = await this.progress(taskId);
    if (p.final || p.queuedBehind === null)
      throw new IllegalStateError(`task ${taskId} is not queued behind another task of its session`);
    await this.deps.answers.recordResolution(p, { type: 'SESSION_TURN_BEGAN', payload: turn });
  }

  /**
   * A task whose interrupt was recorded while nothing ran it (it waited) is run here to its end. False
   * when it has ended, is not interrupted, or runs here already.
   */
  async runInterrupted(taskId: string): Promise<boolean> {
    const p = await this.progress(taskId);
    if (p.final || p.interruptedBy === null || this.deps.runs.holds(taskId)) return false;
    this.deps.runs.enqueue(taskId, { child: p.parent_task_id !== null });
    return true;
  }

  /** A signal for the task: recorded once per signal id, delivered to a wait for its name (see sendSignal). */
  sendSignal(taskId: string, signal: SignalToSend): Promise<SignalSent> {
    return sendSignal(this.deps.answers, (id) => this.progress(id), taskId, signal);
  }

  /**
   * Resolves once a waiting task has moved on from event `seq`: it runs (or is queued) here, it
   * ended or waits again, or another process took it up.
   */
  async untilMovedOn(taskId: string, seq: number): Promise<void> {
    for (let movedAt: number | null = null, lookedAt = 0; ;) {
      if (this.deps.runs.holds(taskId)) return;
      const p = await this.progress(taskId);
      // queued behind a task another process runs (whose end this one may not hear of): its turn is looked for
      if (p.queuedBehind !== null && !p.final && Date.now() - lookedAt >= TURN_LOOK_MS) {
        lookedAt = Date.now();
        await this.deps.sessions.begin(taskId);
        continue;
      }
      if (p.last_seq > seq) {
        if (p.final || SUSPENDED_STATUSES.includes(p.status)) return;
        movedAt ??= Date.now();
        if (Date.now() - movedAt > MOVED_ON_ELSEWHERE_MS) return;
      }
      await new Promise((resolve) => setTimeout(resolve, MOVED_ON_POLL_MS));
    }
  }

  /**
   * Every task the log shows unfinished, not waiting for a person and not run by a live owner is
   * claimed and queued again (`force`: taken even from a live owner, bumping its lease's epoch).
   */
  resumeUnfinished(options: { force?: boolean } = {}): Promise<string[]> {
    return this.deps.recovery.resumeUnfinished(options);
  }

  /**
   * Fires the timer the task waits for once it is due (`early`: now, due or not; a replay fires the
   * recording's firings so). False when there was nothing to fire here.
   */
  fireTimer(taskId: string, options: { early?: boolean } = {}): Promise<boolean> {
    return this.deps.recovery.fireTimer(taskId, options);
  }

  /**
   * A server's crash recovery: resume what nobody runs now, then look again every lease renewal
   * interval, so the tasks of a process that died are taken over once their leases expire.
   */
  startRecovery(): Promise<string[]> {
    return this.deps.recovery.startRecovery();
  }

  /** The owner id of another process that holds a live lease on the task, null when none does. */
  ownedElsewhere(taskId: string): Promise<string | null> {
    return ownedElsewhere(this.deps.ownership ?? null, taskId);
  }

  /** Resolves once the task is neither queued nor running here: ended, or waiting for a person. */
  async settled(taskId: string): Promise<TaskProgress> {
    const ended = await this.deps.runs.settled(taskId);
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
    this.deps.runs.stopTaking();
    await this.deps.recovery.close();
    this.deps.admission.close();
    await this.deps.runs.stopRunning();
    this.deps.answers.close();
    this.deps.sessions.close();
    await this.deps.ownership?.close();
  }
}
