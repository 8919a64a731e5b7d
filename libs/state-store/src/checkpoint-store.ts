import {
  NotFoundError,
  RuntimeEvent,
  StopReason,
  TaskStatus,
  TaskUsage,
  canonicalJson,
  newId,
} from '@runledger/contracts';
import { Database, EventStore, KeyOwner, PreparedQuery } from '@runledger/event-store';
import { Insertable, Kysely } from 'kysely';
import { z } from 'zod';
import { CheckpointsTable, StateStoreDatabase, StateStoreTables } from './schema';
import { TaskState, evolve, foldTaskState } from './task-state';
import { TaskStateStore } from './task-state-store';

/** Version of the stored snapshot's shape; a row of another version is ignored (the full fold is used). */
export const CHECKPOINT_SCHEMA_VERSION = 1;

const PendingRequestSchema = z.looseObject({
  kind: z.enum(['permission', 'secret']),
  request_id: z.string(),
  call_id: z.string(),
  tool: z.string(),
  args: z.record(z.string(), z.unknown()).optional(),
  args_hash: z.string().optional(),
  covers: z.string().optional(),
  secret_name: z.string().optional(),
  reason: z.string(),
});

/**
 * TaskState as a snapshot holds it. Objects are loose and carry no defaults, so
 * a parsed snapshot is exactly what was folded (directives, checks and budgets
 * are the fold's own copies of validated event payloads).
 */
const TaskStateSchema = z.looseObject({
  task_id: z.string(),
  status: TaskStatus,
  session_id: z.string(),
  input: z.string(),
  last_directive: z.looseObject({ type: z.string() }).nullable(),
  pending_requests: z.array(PendingRequestSchema),
  stop_reason: StopReason.nullable(),
  stop_detail: z.string().nullable(),
  result: z.string().nullable(),
  usage: TaskUsage,
  rounds: z.number().int().nonnegative(),
  last_seq: z.number().int().nonnegative(),
  idempotency_key: z.string().nullable(),
  request_hash: z.string().nullable(),
  accept_checks: z.array(z.looseObject({ id: z.string(), kind: z.string() })),
  budgets: z.record(z.string(), z.unknown()),
  created_at: z.string(),
  updated_at: z.string(),
});

/** The `state` column: the folded task state under its schema version. */
const StoredSnapshot = z.strictObject({
  $schema_version: z.literal(CHECKPOINT_SCHEMA_VERSION),
  state: TaskStateSchema,
});

const storedSnapshot = (state: TaskState): string =>
  JSON.stringify({ $schema_version: CHECKPOINT_SCHEMA_VERSION, state });

/** The snapshot's task state, or null when the column is not a snapshot of this version. */
function parseSnapshot(column: string): TaskState | null {
  let json: unknown;
  try {
    json = JSON.parse(column);
  } catch {
    return null;
  }
  const parsed = StoredSnapshot.safeParse(json);
  return parsed.success ? (parsed.data.state as unknown as TaskState) : null;
}

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

/** What a checkpoint's caller-defined context is at an event: recomputed from the events up to it. */
export type CheckpointContextFold = (taskId: string, events: readonly RuntimeEvent[]) => unknown;

export interface CheckpointRebuildReport {
  checkpoints: number;
  /** checkpoints whose stored snapshot differed from the fold of the log (now rewritten) */
  changed: string[];
}

const PAGE = 1000;

/**
 * How `latest` treats the caller-defined context: `read` it, `skip` it (the
 * caller needs only the task state; a context can be large), or `require` it
 * (the newest checkpoint that holds one: a checkpoint may be saved without).
 */
export type CheckpointContextRead = 'read' | 'skip' | 'require';

/** The context column of a checkpoint saved without one. */
const NO_CONTEXT = JSON.stringify(null);

/** A checkpoint row's insert, compiled once per handle: a writer stores one at each of its checkpoints. */
const insertCheckpoint = new PreparedQuery<StateStoreDatabase, Insertable<CheckpointsTable>, never>(
  ['checkpoint_id', 'task_id', 'label', 'at_sequence', 'event_sequence', 'state', 'context', 'created_at'],
  (db, row) => db.insertInto('checkpoints').values(row),
);

/**
 * Snapshots of a task's state plus a caller-defined context at milestones.
 * The CHECKPOINT_SAVED event is appended first and the snapshot row second: a
 * crash between the two leaves an event without a snapshot, and loading then
 * falls back to the previous checkpoint, never to a wrong state.
 */
/** A task's copies are sealed under its stream's key, like its events. */
const ownerOf = (state: TaskState): KeyOwner => ({ session_id: state.session_id, stream_id: state.task_id });

export class CheckpointStore {
  private readonly db: Kysely<StateStoreDatabase>;
  /** for the snapshots of a writer's own checkpoints, which nothing waits on: see record */
  private readonly lazyDb: Kysely<StateStoreDatabase>;

  constructor(
    handle: { db: Kysely<Database>; lazyDb?: Kysely<Database> },
    private readonly events: EventStore,
    private readonly taskStates: TaskStateStore,
  ) {
    this.db = handle.db.withTables<StateStoreTables>();
    this.lazyDb = (handle.lazyDb ?? handle.db).withTables<StateStoreTables>();
  }

  /**
   * Appends a CHECKPOINT_SAVED of its own and stores the snapshot. Throws
   * NotFoundError for an unknown task, ConcurrencyError if the task moved on
   * while saving (retry).
   */
  async save(taskId: string, label: string, context: unknown): Promise<Checkpoint> {
    const before = await this.taskStates.get(taskId);
    if (!before) throw new NotFoundError(`task ${taskId} not found`, { task_id: taskId });
    const { events } = await this.events.append(
      taskId,
      [
        {
          type: 'CHECKPOINT_SAVED',
          payload: { checkpoint_id: newId('ckpt'), label, at_sequence: before.last_seq },
        },
      ],
      { expected: before.last_seq },
    );
    return this.insert(events[0], evolve(before, events[0]), context);
  }

  /**
   * Stores the snapshot of a CHECKPOINT_SAVED the task's writer appended with
   * the events that triggered it: the state is the previous checkpoint plus the
   * events after it up to this one, `context` is the writer's own. A writer
   * that folds the task state itself passes it as `stateAt` (the state through
   * `saved`): nothing is read then. The row is written through `lazyDb`: with
   * a SQLite writer thread it rides in the task's next commit instead of
   * taking a commit (and a round trip to the thread) of its own; the promise
   * settles once it is written.
   */
  async record(saved: RuntimeEvent, context: unknown, stateAt?: TaskState | null): Promise<Checkpoint> {
    if (saved.type !== 'CHECKPOINT_SAVED')
      throw new TypeError(`a checkpoint is recorded for a CHECKPOINT_SAVED event, not ${saved.type}`);
    if (stateAt?.task_id === saved.task_id && stateAt.last_seq === saved.sequence)
      return this.insert(saved, stateAt, context, this.lazyDb);
    // The task-state projection is written in the append's own transaction, so right after the append that
    // ended with this CHECKPOINT_SAVED its row is the state through it: nothing to fold.
    const current = await this.taskStates.get(saved.task_id);
    if (current?.last_seq === saved.sequence) return this.insert(saved, current, context, this.lazyDb);
    const previous = await this.latest(saved.task_id, saved.sequence - 1, 'skip');
    const tail = await this.readAfter(saved.task_id, previous?.event_sequence ?? 0, saved.sequence);
    const state = foldTaskState(tail, previous?.state ?? null);
    if (!state) throw new NotFoundError(`task ${saved.task_id} not found`, { task_id: saved.task_id });
    return this.insert(saved, state, context, this.lazyDb);
  }

  /**
   * The newest checkpoint (at or before `atMostSequence`); null when there is
   * none or its snapshot is not of this version (the caller folds the log).
   * A checkpoint saved without a context has context null.
   */
  async latest(
    taskId: string,
    atMostSequence?: number,
    context: CheckpointContextRead = 'read',
  ): Promise<Checkpoint | null> {
    const row = await this.db
      .selectFrom('checkpoints')
      .select(['checkpoint_id', 'task_id', 'label', 'at_sequence', 'event_sequence', 'state', 'created_at'])
      .$if(context !== 'skip', (q) => q.select('context'))
      .$if(context === 'require', (q) => q.where('context', '!=', NO_CONTEXT))
      .where('task_id', '=', taskId)
      // no bound when none is asked for: a sequence column is a 32-bit integer on PostgreSQL
      .$if(atMostSequence !== undefined, (q) => q.where('event_sequence', '<=', atMostSequence!))
      .orderBy('event_sequence', 'desc')
      .limit(1)
      .executeTakeFirst();
    const snapshot = row ? await this.events.openCopy(row.state) : null;
    const state = snapshot === null ? null : parseSnapshot(snapshot);
    if (!row || !state) return null;
    const stored = row.context === undefined ? null : await this.events.openCopy(row.context);
    return { ...row, state, context: stored === null ? null : (JSON.parse(stored) as unknown) };
  }

  /**
   * Checks every snapshot against the fold of the log up to and including its
   * CHECKPOINT_SAVED (and, given `contextOf`, its context against the context
   * recomputed from the same events). A snapshot that differs, or is of an
   * unknown version, is named in `changed` and rewritten from the log.
   */
  async rebuild(contextOf?: CheckpointContextFold): Promise<CheckpointRebuildReport> {
    const rows = await this.db
      .selectFrom('checkpoints')
      .select(['checkpoint_id', 'task_id', 'event_sequence', 'state', 'context'])
      .orderBy('task_id')
      .orderBy('event_sequence')
      .execute();
    const changed: string[] = [];
    for (const row of rows) {
      const events = await this.readAfter(row.task_id, 0, row.event_sequence);
      const folded = foldTaskState(events);
      const opened = await this.events.openCopy(row.state);
      const stored = opened === null ? null : parseSnapshot(opened);
      // a checkpoint saved without a context keeps none: there is nothing to check it against
      const checkContext = contextOf !== undefined && row.context !== NO_CONTEXT;
      const context = checkContext ? (contextOf(row.task_id, events) ?? null) : null;
      const stateDiffers = !folded || !stored || canonicalJson(folded) !== canonicalJson(stored);
      const storedContext = checkContext ? await this.events.openCopy(row.context) : null;
      const contextDiffers =
        checkContext &&
        (storedContext === null || canonicalJson(context) !== canonicalJson(JSON.parse(storedContext)));
      if (!stateDiffers && !contextDiffers) continue;
      changed.push(row.checkpoint_id);
      if (!folded) {
        // no task behind the snapshot any more: nothing to rewrite it from
        await this.db.deleteFrom('checkpoints').where('checkpoint_id', '=', row.checkpoint_id).execute();
        continue;
      }
      await this.db
        .updateTable('checkpoints')
        .set({
          state: await this.events.sealCopy(ownerOf(folded), storedSnapshot(folded)),
          ...(checkContext
            ? { context: await this.events.sealCopy(ownerOf(folded), JSON.stringify(context)) }
            : {}),
        })
        .where('checkpoint_id', '=', row.checkpoint_id)
        .execute();
    }
    return { checkpoints: rows.length, changed };
  }

  /** Latest checkpoint + the events after it; null for an unknown task. */
  async load(taskId: string): Promise<LoadedTask | null> {
    const checkpoint = await this.latest(taskId);
    const eventsAfter = await this.readAfter(taskId, checkpoint?.event_sequence ?? 0);
    const state = foldTaskState(eventsAfter, checkpoint?.state ?? null);
    return state ? { state, checkpoint, events_after: eventsAfter } : null;
  }

  private async insert(
    saved: RuntimeEvent,
    state: TaskState,
    context: unknown,
    db = this.db,
  ): Promise<Checkpoint> {
    if (saved.type !== 'CHECKPOINT_SAVED') throw new TypeError(`not a CHECKPOINT_SAVED: ${saved.type}`);
    const checkpoint: Checkpoint = {
      checkpoint_id: saved.payload.checkpoint_id,
      task_id: saved.task_id,
      label: saved.payload.label,
      at_sequence: saved.payload.at_sequence,
      event_sequence: saved.sequence,
      state,
      context: context ?? null,
      created_at: saved.created_at,
    };
    // the snapshot and context hold the task's content: sealed like its events, so an erasure shreds them too
    const contextText = JSON.stringify(checkpoint.context);
    await insertCheckpoint.execute(db, {
      ...checkpoint,
      state: await this.events.sealCopy(ownerOf(state), storedSnapshot(state)),
      context:
        contextText === NO_CONTEXT ? contextText : await this.events.sealCopy(ownerOf(state), contextText),
    });
    return checkpoint;
  }

  /** The task's events after `afterSeq`, up to and including `untilSeq` when given. */
  private async readAfter(taskId: string, afterSeq: number, untilSeq?: number): Promise<RuntimeEvent[]> {
    const out: RuntimeEvent[] = [];
    for (;;) {
      const want = untilSeq === undefined ? PAGE : Math.min(PAGE, untilSeq - afterSeq - out.length);
      if (want <= 0) return out;
      const page = await this.events.readStream(taskId, { after_seq: afterSeq + out.length, limit: want });
      out.push(...page);
      if (page.length < want) return out;
    }
  }
}
