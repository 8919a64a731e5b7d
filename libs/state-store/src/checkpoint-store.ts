import { NotFoundError, RuntimeEvent, canonicalJson, newId } from '@runledger/contracts';
import { EventStore, SqliteHandle } from '@runledger/event-store';
import { Kysely } from 'kysely';
import { StateStoreDatabase, StateStoreTables } from './schema';
import { TaskState, evolve, foldTaskState } from './task-state';
import { TaskStateStore } from './task-state-store';

export interface Checkpoint {
  checkpoint_id: string;
  task_id: string;
  label: string;
  /** the last task event the snapshot covers before its own CHECKPOINT_SAVED */
  at_sequence: number;
  /** sequence of the CHECKPOINT_SAVED event; the snapshot state includes it */
  event_sequence: number;
  state: TaskState;
  context: unknown;
  created_at: string;
}

export interface LoadedTask {
  /** latest checkpoint + the events after it, folded: equal to a full fold */
  state: TaskState;
  checkpoint: Checkpoint | null;
  /** the events folded on top of the checkpoint (the whole stream without one) */
  events_after: RuntimeEvent[];
}

/**
 * Snapshots of a task's state plus a caller-defined context at milestones.
 * The CHECKPOINT_SAVED event is appended first and the snapshot row second: a
 * crash between the two leaves an event without a snapshot, and loading then
 * falls back to the previous checkpoint, never to a wrong state.
 */
export class CheckpointStore {
  private readonly db: Kysely<StateStoreDatabase>;

  constructor(
    handle: SqliteHandle,
    private readonly events: EventStore,
    private readonly taskStates: TaskStateStore,
  ) {
    this.db = handle.db.withTables<StateStoreTables>();
  }

  /** Throws NotFoundError for an unknown task, ConcurrencyError if the task moved on while saving (retry). */
  async save(taskId: string, label: string, context: unknown): Promise<Checkpoint> {
    const before = await this.taskStates.get(taskId);
    if (!before) throw new NotFoundError(`task ${taskId} not found`, { task_id: taskId });
    const checkpointId = newId('ckpt');
    const { events } = await this.events.append(
      taskId,
      [
        {
          type: 'CHECKPOINT_SAVED',
          payload: { checkpoint_id: checkpointId, label, at_sequence: before.last_seq },
        },
      ],
      { expected: before.last_seq },
    );
    const saved = events[0];
    const checkpoint: Checkpoint = {
      checkpoint_id: checkpointId,
      task_id: taskId,
      label,
      at_sequence: before.last_seq,
      event_sequence: saved.sequence,
      state: evolve(before, saved),
      context: context ?? null,
      created_at: saved.created_at,
    };
    await this.db
      .insertInto('checkpoints')
      .values({
        ...checkpoint,
        state: JSON.stringify(checkpoint.state),
        context: JSON.stringify(checkpoint.context),
      })
      .execute();
    return checkpoint;
  }

  async latest(taskId: string): Promise<Checkpoint | null> {
    const row = await this.db
      .selectFrom('checkpoints')
      .selectAll()
      .where('task_id', '=', taskId)
      .orderBy('event_sequence', 'desc')
      .limit(1)
      .executeTakeFirst();
    return row
      ? { ...row, state: JSON.parse(row.state) as TaskState, context: JSON.parse(row.context) as unknown }
      : null;
  }

  /**
   * Recompute every snapshot's state from the log (the fold up to and
   * including its CHECKPOINT_SAVED), so a snapshot never outlives a change of
   * the fold. The caller's context is kept as saved. Returns the checkpoints
   * seen and those whose stored state differed.
   */
  async rebuild(): Promise<{ checkpoints: number; changed: string[] }> {
    const rows = await this.db
      .selectFrom('checkpoints')
      .select(['checkpoint_id', 'task_id', 'event_sequence', 'state'])
      .orderBy('task_id')
      .orderBy('event_sequence')
      .execute();
    const changed: string[] = [];
    for (const row of rows) {
      const events = await this.events.readStream(row.task_id, { limit: row.event_sequence });
      const folded = foldTaskState(events);
      if (canonicalJson(folded) === canonicalJson(JSON.parse(row.state))) continue;
      const state = JSON.stringify(folded);
      await this.db
        .updateTable('checkpoints')
        .set({ state })
        .where('checkpoint_id', '=', row.checkpoint_id)
        .execute();
      changed.push(row.checkpoint_id);
    }
    return { checkpoints: rows.length, changed };
  }

  /** Latest checkpoint + the events after it; null for an unknown task. */
  async load(taskId: string): Promise<LoadedTask | null> {
    const checkpoint = await this.latest(taskId);
    const after = checkpoint?.event_sequence ?? 0;
    const eventsAfter: RuntimeEvent[] = [];
    for (;;) {
      const page = await this.events.readStream(taskId, {
        after_seq: after + eventsAfter.length,
        limit: 1000,
      });
      eventsAfter.push(...page);
      if (page.length < 1000) break;
    }
    const state = foldTaskState(eventsAfter, checkpoint?.state ?? null);
    return state ? { state, checkpoint, events_after: eventsAfter } : null;
  }
}
