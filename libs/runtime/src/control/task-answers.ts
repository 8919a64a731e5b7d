import {
  ConcurrencyError,
  IllegalStateError,
  LeaseLostError,
  NewEvent,
  RuntimeEvent,
  isFinalEventType,
  newId,
} from '@runledger/contracts';
import { EventStore } from '@runledger/event-store';
import { LeaseLostSignal } from '../ports';
import { TaskProgress } from '../log/progress';
import { RunQueue } from './run-queue';
import { TaskOwnership } from './task-ownership';

/**
 * What this process appends to a task from outside its run (a person's answer, a timer's firing, a
 * resume marker), and what it does on the answers and ends other processes commit.
 */
export class TaskAnswers {
  /** event ids of the answers this process records: it runs those tasks on itself, noticeCommits skips them */
  private readonly ownAnswers = new Set<string>();
  private readonly detachCommits: () => void;

  constructor(
    private readonly store: EventStore,
    private readonly runs: RunQueue,
    private readonly ownership: TaskOwnership | null,
  ) {
    this.detachCommits = ownership
      ? store.onCommitted((events) => this.noticeCommits(events))
      : () => undefined;
  }

  /** Appended under this process's lease on the task when it holds one. */
  async appendIfUnchanged(p: TaskProgress, event: NewEvent | readonly NewEvent[]): Promise<void> {
    const lease = this.ownership?.tokenOf(p.task_id);
    const events = (Array.isArray(event) ? event : [event]) as readonly NewEvent[];
    try {
      await this.store.append(
        p.task_id,
        events.map((e) => ({ ...e, session_id: p.session_id })),
        {
          expected: p.last_seq,
          ...(lease ? { lease } : {}),
        },
      );
    } catch (err) {
      if (err instanceof ConcurrencyError)
        throw new IllegalStateError(`task ${p.task_id} changed meanwhile; try again`);
      if (err instanceof LeaseLostError && lease) this.ownership!.lost(p.task_id, lease.epoch);
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
  async recordResolution(
    p: TaskProgress,
    event: NewEvent | readonly NewEvent[],
    accepted?: () => void,
  ): Promise<void> {
    const ownership = this.ownership;
    const claimed =
      ownership && !this.runs.closed
        ? !ownership.holds(p.task_id) && (await ownership.claim(p.task_id))
        : false;
    const events = ((Array.isArray(event) ? event : [event]) as readonly NewEvent[]).map((e) => ({
      ...e,
      event_id: newId('evt'),
    }));
    for (const e of events) this.ownAnswers.add(e.event_id);
    try {
      await this.appendIfUnchanged(p, events);
    } catch (err) {
      if (claimed) await ownership!.release(p.task_id);
      throw err;
    } finally {
      for (const e of events) this.ownAnswers.delete(e.event_id);
    }
    accepted?.();
    if (!ownership || ownership.holds(p.task_id))
      this.runs.enqueue(p.task_id, { child: p.parent_task_id !== null });
  }

  /** Stops following the log's commits. */
  close(): void {
    this.detachCommits();
  }

  /**
   * Commits of every writer, other processes' included: an answer (a client's tool result too) to a task this process holds
   * runs it on; a task that ended elsewhere (cancelled through another instance) stops here.
   */
  private noticeCommits(events: readonly RuntimeEvent[]): void {
    for (const e of events) {
      if (isFinalEventType(e.type)) {
        this.runs.abortRun(e.task_id, new LeaseLostSignal(`task ${e.task_id} ended`));
      } else if (
        (e.type === 'PERMISSION_RESOLVED' ||
          e.type === 'SECRET_PROVIDED' ||
          e.type === 'TIMER_FIRED' ||
          e.type === 'SIGNAL_DELIVERED' ||
          e.type === 'SESSION_TURN_BEGAN' ||
          e.type === 'INTERRUPT_REQUESTED' ||
          ((e.type === 'TOOL_COMPLETED' || e.type === 'TOOL_FAILED') &&
            e.payload.request_id !== undefined)) &&
        !this.ownAnswers.has(e.event_id) &&
        this.ownership?.holds(e.task_id)
      ) {
        this.runs.enqueue(e.task_id);
      }
    }
  }
}
