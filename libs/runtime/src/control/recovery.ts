import { IllegalStateError, LeaseLostError, RuntimeEvent, isFinalEventType } from '@runledger/contracts';
import { EventStore } from '@runledger/event-store';
import { TaskProgress, pendingTimer } from '../log/progress';
import { RuntimeLogger } from '../runtime-logger';
import { SUSPENDED_STATUSES } from '../loop/runtime-loop';
import { DueTimers } from './due-timers';
import { RunQueue } from './run-queue';
import { SessionQueue } from './session-queue';
import { TaskAnswers } from './task-answers';
import { deliverKeptSignal } from './task-signals';
import { TaskOwnership, ownedElsewhere } from './task-ownership';
import { UnfinishedTasks } from './unfinished-tasks';

export interface RecoveryDeps {
  store: EventStore;
  runs: RunQueue;
  answers: TaskAnswers;
  ownership: TaskOwnership | null;
  logger: RuntimeLogger;
  /** the tasks queued behind others of their session */
  sessions: SessionQueue;
  /** where a task stands (its latest checkpoint + the events after it) */
  progress: (taskId: string) => Promise<TaskProgress>;
  /**
   * whether this process fires timers by the wall clock when they come due (false: only fireTimer
   * fires them, as a replay does with the recording's firings)
   */
  wallClockTimers: boolean;
}

/** how soon a due timer whose task was busy is looked at again */
const TIMER_RETRY_MS = 100;

/**
 * The tasks the log shows unfinished: resumed on boot and, with leases, taken over from a process that
 * died by a sweep every lease renewal interval; their timers fired when they come due.
 */
export class Recovery {
  private readonly unfinished: UnfinishedTasks;
  /** the timers this process fires when they come due; null when it fires none by the wall clock */
  private readonly dueTimers: DueTimers | null;
  private readonly detachTimers: () => void;
  private sweeping: { timer: NodeJS.Timeout; sweep: Promise<unknown> | null } | null = null;

  constructor(private readonly deps: RecoveryDeps) {
    this.unfinished = new UnfinishedTasks(deps.store);
    this.dueTimers = deps.wallClockTimers
      ? new DueTimers((taskId) => {
          void this.fireTimer(taskId).catch((err: unknown) =>
            this.deps.logger.warn(
              { task_id: taskId, err },
              'timer not fired; the recovery sweep tries again',
            ),
          );
        })
      : null;
    this.detachTimers = this.dueTimers
      ? deps.store.onCommitted((events) => this.noticeTimers(events))
      : () => undefined;
  }

  /**
   * Every task the log shows unfinished, not waiting for a person and not run by a live owner is
   * claimed and queued again (`force`: taken even from a live owner, bumping its lease's epoch).
   */
  async resumeUnfinished(options: { force?: boolean } = {}): Promise<string[]> {
    const runs = this.deps.runs;
    const candidates = (await this.unfinished.list()).filter((taskId) => !runs.holds(taskId));
    const ownership = this.deps.ownership;
    const free = ownership && !options.force ? new Set(await ownership.claimable(candidates)) : null;
    // every marker is written before any task runs: a resumed parent starts its children itself
    const resumed: { taskId: string; child: boolean }[] = [];
    for (const taskId of candidates) {
      if (runs.closed) break;
      if (free && !free.has(taskId)) continue;
      const p = await this.deps.progress(taskId);
      if (p.final) continue;
      // queued behind another task of its session: it begins when that one ended, wherever it ran. What
      // its strategy asks of the tasks before it is applied again first, in case a crash cut it short
      if (p.queuedBehind !== null) {
        await this.deps.sessions
          .applyStrategy(taskId)
          .catch((err: unknown) =>
            this.deps.logger.warn(
              { task_id: taskId, err },
              'strategy of a queued message not applied; the next sweep tries again',
            ),
          );
        this.deps.sessions.hold(taskId, p.queuedBehind);
        continue;
      }
      if (p.status === 'waiting') await deliverKeptSignal(this.deps.answers, p);
      // a waiting task that was interrupted is run to end it
      if (SUSPENDED_STATUSES.includes(p.status) && p.interruptedBy === null) continue;
      if (ownership && !(await ownership.claim(taskId, { force: options.force }))) continue;
      if (p.last_seq > 1) {
        const marked = await this.deps.answers
          .appendIfUnchanged(p, {
            type: 'GUARD_TRIGGERED',
            payload: {
              guard: 'resumed',
              round: p.round,
              detail: 'resumed from the log after a restart',
              data: { at_sequence: p.last_seq },
            },
          })
          .then(
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
    for (const { taskId, child } of resumed) runs.enqueue(taskId, { child });
    if (this.dueTimers && !runs.closed)
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
    const p = await this.deps.progress(taskId);
    const timer = pendingTimer(p);
    if (!timer || p.final) return false;
    if (!options.early && Date.parse(timer.due_at) > Date.now()) {
      this.dueTimers?.arm(taskId, timer.due_at);
      return false;
    }
    // a run still winding down (here, or under another instance's live lease) appends on: fire after it
    if (this.deps.runs.isRunning(taskId) || (await ownedElsewhere(this.deps.ownership, taskId)) !== null) {
      this.dueTimers?.arm(taskId, new Date(Date.now() + TIMER_RETRY_MS).toISOString());
      return false;
    }
    try {
      await this.deps.answers.recordResolution(p, {
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
    if (ownership && !this.deps.runs.closed && !this.sweeping) {
      const sweeping = {
        sweep: null as Promise<unknown> | null,
        timer: setInterval(() => {
          sweeping.sweep ??= this.resumeUnfinished()
            .catch((err: unknown) => this.deps.logger.warn({ err }, 'recovery sweep failed; trying again'))
            .finally(() => (sweeping.sweep = null));
        }, ownership.settings.renewMs),
      };
      sweeping.timer.unref();
      this.sweeping = sweeping;
    }
    return resumed;
  }

  /** Stops the sweep (resolving once a sweep under way is done) and the timers. */
  async close(): Promise<void> {
    if (this.sweeping) {
      clearInterval(this.sweeping.timer);
      await this.sweeping.sweep;
    }
    this.dueTimers?.stop();
    this.detachTimers();
  }

  /** Timers set anywhere are armed here: whichever instance sees one due first fires it. */
  private noticeTimers(events: readonly RuntimeEvent[]): void {
    for (const e of events) {
      if (e.type === 'TIMER_SET') this.dueTimers?.arm(e.task_id, e.payload.due_at);
      else if (e.type === 'TIMER_FIRED' || e.type === 'SIGNAL_DELIVERED' || isFinalEventType(e.type))
        this.dueTimers?.drop(e.task_id);
    }
  }
}
