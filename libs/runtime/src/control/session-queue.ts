import {
  ConcurrencyError,
  DEFAULT_ON_BUSY,
  IllegalStateError,
  LeaseLostError,
  OnBusy,
  SessionTurn,
  isFinalEventType,
  isTerminalStatus,
} from '@runledger/contracts';
import { EventStore } from '@runledger/event-store';
import { TaskProgress } from '../log/progress';
import type { SessionTask } from '../log/task-views';
import { RuntimeLogger } from '../runtime-logger';
import { RunQueue } from './run-queue';
import { SESSION_TASKS_READ, sessionTurnsOf } from './session-turns';
import { SessionLimits, sessionBudgetAtTurn } from './session-budget';
import { TaskAnswers } from './task-answers';
import { TaskOwnership } from './task-ownership';

/** The stream of a session's own events: its settings and the tasks rolled back in it. */
export const sessionStream = (sessionId: string): string => `session:${sessionId}`;

/** What a session's own stream says. */
export interface SessionSettings {
  /** the strategy the session set; null: none (DEFAULT_ON_BUSY applies) */
  on_busy: OnBusy | null;
  /** the budget across its tasks the session set (SESSION_BUDGET_SET); null: none */
  budget: SessionLimits | null;
  /** tasks a newer message rolled back: never shown in a later task's history */
  rolled_back: ReadonlySet<string>;
}

export interface SessionQueueDeps {
  store: EventStore;
  runs: RunQueue;
  answers: TaskAnswers;
  logger: RuntimeLogger;
  progress: (taskId: string) => Promise<TaskProgress>;
  /** the latest `limit` tasks of a session, oldest first */
  sessionTasks: (sessionId: string, limit: number) => Promise<SessionTask[]>;
  /**
   * the leases of the processes sharing the log: a decision for a session holds the lease on its
   * stream's name, so two processes never decide for one session at once (absent: this process alone
   * writes the log)
   */
  ownership?: TaskOwnership | null;
}

/** how often a decision that keeps meeting a moving task is made again */
const ATTEMPTS = 30;

const pause = (attempt: number) =>
  new Promise((r) => setTimeout(r, Math.min(50, attempt * 5) * (0.5 + Math.random())));

/**
 * Messages that arrive together (double-texting): which tasks of a session are unfinished, the
 * session's strategy, and the tasks queued behind others. A queued task begins (SESSION_TURN_BEGAN,
 * with the session's history as it stands then) once every earlier unfinished task of its session
 * ended, whichever instance sees that first: the append expects the sequence it read, so a turn
 * begins once. This process watches the tasks it queued and those its recovery sweep finds queued.
 */
export class SessionQueue {
  /** task ended -> the queued tasks waiting for it */
  private readonly behind = new Map<string, Set<string>>();
  /** per session, the submission being decided here: decisions of one session go one at a time */
  private readonly deciding = new Map<string, Promise<unknown>>();
  private readonly detach: () => void;
  /** how a rolled-back task is cancelled (the runtime's cancel, with its children) */
  private cancel: (taskId: string) => Promise<void> = () =>
    Promise.reject(new IllegalStateError('no runtime cancels the tasks of this session queue'));

  constructor(private readonly deps: SessionQueueDeps) {
    this.detach = deps.store.onCommitted((events) => {
      for (const e of events) {
        if (!isFinalEventType(e.type)) continue;
        const queued = this.behind.get(e.task_id);
        if (!queued) continue;
        this.behind.delete(e.task_id);
        for (const taskId of queued) this.beginSoon(taskId);
      }
    });
  }

  /** The runtime's cancel, which a rollback ends the rolled-back tasks with. */
  cancelsWith(cancel: (taskId: string) => Promise<void>): void {
    this.cancel = cancel;
  }

  /**
   * Runs `decide` (a submission's look at the session and its TASK_RECEIVED) alone for the session:
   * after the earlier decisions made here, and holding the lease on the session's stream name, so no
   * other process sharing the log decides for it meanwhile. A lease a process that died left lapses
   * after the lease TTL; until then a decision waits for it.
   */
  one<T>(sessionId: string, decide: () => Promise<T>): Promise<T> {
    const before = this.deciding.get(sessionId) ?? Promise.resolve();
    const alone = () => this.holdingSession(sessionId, decide);
    const run = before.then(alone, alone);
    const settled = run.then(
      () => undefined,
      () => undefined,
    );
    this.deciding.set(sessionId, settled);
    void settled.then(() => {
      if (this.deciding.get(sessionId) === settled) this.deciding.delete(sessionId);
    });
    return run;
  }

  private async holdingSession<T>(sessionId: string, decide: () => Promise<T>): Promise<T> {
    const ownership = this.deps.ownership;
    if (!ownership) return decide();
    const key = sessionStream(sessionId);
    // a live holder renews its lease: past twice the TTL it is not a dead one's
    const deadline = Date.now() + 2 * ownership.settings.ttlMs;
    for (let attempt = 1; !(await ownership.claim(key)); attempt++) {
      if (this.deps.runs.closed)
        throw new IllegalStateError('the runtime is stopping; send the message again');
      if (Date.now() > deadline)
        throw new IllegalStateError(
          `another instance is deciding for session ${sessionId} and did not finish; send the message again`,
        );
      await pause(attempt);
    }
    try {
      return await decide();
    } finally {
      await ownership.release(key);
    }
  }

  async settings(sessionId: string): Promise<SessionSettings> {
    let on_busy: OnBusy | null = null;
    let budget: SessionLimits | null = null;
    const rolled_back = new Set<string>();
    for (const e of await this.deps.store.readWholeStream(sessionStream(sessionId))) {
      if (e.type === 'SESSION_CONFIGURED') on_busy = e.payload.on_busy;
      else if (e.type === 'TASK_ROLLED_BACK') rolled_back.add(e.payload.task_id);
      else if (e.type === 'SESSION_BUDGET_SET') budget = { ...e.payload, source: 'setting', set_by: null };
    }
    return { on_busy, budget, rolled_back };
  }

  /** The session's strategy from now on (recorded in its own stream). */
  async configure(sessionId: string, on_busy: OnBusy): Promise<void> {
    await this.deps.store.append(
      sessionStream(sessionId),
      [{ type: 'SESSION_CONFIGURED', session_id: sessionId, payload: { on_busy } }],
      { expected: 'any' },
    );
  }

  /** The strategy for a message: its own, else the session's, else the default. */
  strategyOf(requested: OnBusy | undefined, settings: SessionSettings): OnBusy {
    return requested ?? settings.on_busy ?? DEFAULT_ON_BUSY;
  }

  /**
   * Recorded (once per task, whoever records it) before the rolled-back task is cancelled, so no
   * history read after its end shows it.
   */
  async recordRollback(sessionId: string, taskId: string, byTaskId: string): Promise<void> {
    const stream = sessionStream(sessionId);
    for (let attempt = 1; ; attempt++) {
      const events = await this.deps.store.readWholeStream(stream);
      if (events.some((e) => e.type === 'TASK_ROLLED_BACK' && e.payload.task_id === taskId)) return;
      try {
        await this.deps.store.append(
          stream,
          [
            {
              type: 'TASK_ROLLED_BACK',
              session_id: sessionId,
              payload: { task_id: taskId, by_task_id: byTaskId },
            },
          ],
          { expected: events.length ? events[events.length - 1].sequence : 'no_stream' },
        );
        return;
      } catch (err) {
        if (!(err instanceof ConcurrencyError) || attempt >= ATTEMPTS) throw err;
        await pause(attempt);
      }
    }
  }

  /**
   * What a message received behind unfinished tasks of its session asks of them, from its
   * TASK_RECEIVED: interrupt stops each (INTERRUPT_REQUESTED), rollback forgets each (TASK_ROLLED_BACK)
   * and cancels it. Each step is skipped when the log shows it done, so the submission applies it and,
   * after a crash cut that short, recovery applies the rest. `busy`: the tasks the submission found
   * unfinished (otherwise those unfinished now and the one it was queued behind).
   */
  async applyStrategy(taskId: string, busy?: readonly string[]): Promise<void> {
    const [first] = await this.deps.store.readStream(taskId, { limit: 1 });
    if (first?.type !== 'TASK_RECEIVED') return;
    const { session_id, queued_behind, on_busy } = first.payload;
    if (queued_behind === undefined || (on_busy !== 'interrupt' && on_busy !== 'rollback')) return;
    const earlier = busy ?? [...new Set([...(await this.unfinished(session_id, taskId)), queued_behind])];
    if (on_busy === 'interrupt') {
      for (const t of earlier) await this.interrupt(t, taskId);
      return;
    }
    for (const t of earlier) {
      await this.recordRollback(session_id, t, taskId);
      if ((await this.deps.progress(t)).final) continue;
      await this.cancel(t).catch((err: unknown) => {
        // it ended on its own meanwhile: rolled back all the same (left out of the history)
        if (!(err instanceof IllegalStateError)) throw err;
      });
    }
  }

  /** What a task beginning now in the session is shown: its latest ended tasks, those rolled back left out. */
  async history(sessionId: string, settings?: SessionSettings): Promise<SessionTurn[]> {
    const { rolled_back } = settings ?? (await this.settings(sessionId));
    const tasks = await this.deps.sessionTasks(sessionId, SESSION_TASKS_READ);
    return sessionTurnsOf(tasks.filter((t) => !rolled_back.has(t.task_id)));
  }

  /**
   * The session's unfinished tasks a person (or a client) submitted, oldest first: a delegation's
   * children share their parent's session but are part of its run. `before`: only those received
   * before that task.
   */
  async unfinished(sessionId: string, before?: string): Promise<string[]> {
    let tasks = await this.deps.sessionTasks(sessionId, SESSION_TASKS_READ);
    if (before !== undefined) {
      const at = tasks.findIndex((t) => t.task_id === before);
      tasks = at === -1 ? tasks : tasks.slice(0, at);
    }
    const open = tasks.filter((t) => !isTerminalStatus(t.status) && t.task_id !== before);
    const roots: string[] = [];
    for (const t of open) {
      const [first] = await this.deps.store.readStream(t.task_id, { limit: 1 });
      if (first?.type === 'TASK_RECEIVED' && first.payload.parent_task_id === undefined)
        roots.push(t.task_id);
    }
    return roots;
  }

  /** The queued task begins once `behindTaskId` ended (at once when it has). */
  hold(taskId: string, behindTaskId: string): void {
    let queued = this.behind.get(behindTaskId);
    if (!queued) this.behind.set(behindTaskId, (queued = new Set()));
    queued.add(taskId);
    void this.deps
      .progress(behindTaskId)
      .then((p) => {
        if (!p.final || !this.behind.get(behindTaskId)?.delete(taskId)) return;
        if (this.behind.get(behindTaskId)!.size === 0) this.behind.delete(behindTaskId);
        this.beginSoon(taskId);
      })
      .catch((err: unknown) =>
        this.deps.logger.warn(
          { task_id: taskId, err },
          'queued task not looked at; the recovery sweep tries again',
        ),
      );
  }

  private beginSoon(taskId: string): void {
    void this.begin(taskId).catch((err: unknown) =>
      this.deps.logger.warn(
        { task_id: taskId, err },
        'queued task not begun; the recovery sweep tries again',
      ),
    );
  }

  /**
   * The task's turn: when an earlier task of its session is still unfinished it waits for that one
   * instead; otherwise SESSION_TURN_BEGAN with the history as it stands, and the task runs.
   */
  async begin(taskId: string): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const p = await this.deps.progress(taskId);
      if (p.final || p.queuedBehind === null || this.deps.runs.closed) return;
      const earlier = await this.unfinished(p.session_id, taskId);
      if (earlier.length > 0) return this.hold(taskId, earlier[earlier.length - 1]);
      try {
        const settings = await this.settings(p.session_id);
        // what the tasks it waited for spent is the session's now: its budget is taken again
        const session_budget = await sessionBudgetAtTurn({
          task_id: taskId,
          asked: p.budgets,
          earlier: await this.deps.sessionTasks(p.session_id, SESSION_TASKS_READ),
          received: async (id) => {
            const [first] = await this.deps.store.readStream(id, { limit: 1 });
            return first?.type === 'TASK_RECEIVED' ? first.payload : null;
          },
          setting: settings.budget,
        });
        await this.deps.answers.recordResolution(p, {
          type: 'SESSION_TURN_BEGAN',
          payload: {
            after_task_id: p.queuedBehind,
            session_history: await this.history(p.session_id, settings),
            ...(session_budget ? { session_budget } : {}),
          },
        });
        return;
      } catch (err) {
        // begun by another instance, or the task moved (cancelled, interrupted): read again
        if (!(
          err instanceof IllegalStateError ||
          err instanceof LeaseLostError ||
          err instanceof ConcurrencyError
        ))
          throw err;
        if (attempt >= ATTEMPTS) throw err;
        await pause(attempt);
      }
    }
  }

  /**
   * A newer message asks the task to stop (INTERRUPT_REQUESTED): its run ends it at its next safe
   * point; a task that waits (nothing runs it) is run here to end it. False when it had ended.
   */
  async interrupt(taskId: string, byTaskId: string): Promise<boolean> {
    for (let attempt = 1; ; attempt++) {
      const p = await this.deps.progress(taskId);
      if (p.final) return false;
      if (p.interruptedBy !== null) return true;
      try {
        await this.deps.answers.recordResolution(p, {
          type: 'INTERRUPT_REQUESTED',
          payload: { by_task_id: byTaskId },
        });
        return true;
      } catch (err) {
        if (!(err instanceof IllegalStateError || err instanceof LeaseLostError)) throw err;
        if (attempt >= ATTEMPTS) throw err;
        await pause(attempt);
      }
    }
  }

  close(): void {
    this.detach();
    this.behind.clear();
  }
}
