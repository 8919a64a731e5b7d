import { NewEvent, NotFoundError, RuntimeEvent, isFinalEventType, newId } from '@runledger/contracts';
import { EventStore } from '@runledger/event-store';
import { CheckpointStore, TaskState } from '@runledger/state-store';
import { TaskProgress, callIdFor, evolveProgress, foldProgress } from './progress';
import { progressFromSnapshot, progressSnapshot } from './progress-snapshot';
import { RuntimeLogger } from '../runtime-logger';

export interface CheckpointSettings {
  store: CheckpointStore;
  /** a checkpoint at the latest this many events after the previous one */
  everyEvents: number;
}

/**
 * Why a batch of events ends with a checkpoint, as its label; null when it does not. Without
 * `milestones`, the end of a round or a plan step calls for none of its own.
 */
export function checkpointLabel(
  before: TaskProgress,
  batch: readonly NewEvent[],
  sinceCheckpoint: number,
  everyEvents: number,
  milestones = true,
): string | null {
  // an ended task needs no resume point: the projection holds its final state
  if (batch.some((e) => isFinalEventType(e.type) || e.type === 'CHECKPOINT_SAVED')) return null;
  for (const e of batch) {
    if (e.type === 'TASK_AWAITING_PERMISSION') return 'awaiting permission';
    if (e.type === 'TASK_AWAITING_SECRET') return 'awaiting secret';
    if (e.type === 'TASK_AWAITING_CLIENT_TOOL') return 'awaiting client tool';
  }
  return (
    (milestones ? milestoneLabel(before, batch) : null) ??
    everyEventsLabel(sinceCheckpoint, batch, everyEvents)
  );
}

const everyEventsLabel = (sinceCheckpoint: number, batch: readonly NewEvent[], everyEvents: number) =>
  sinceCheckpoint + batch.length >= everyEvents ? `${everyEvents} events` : null;

/** The end of a round or a plan step in `batch`, as a checkpoint's label; null when it holds none. */
function milestoneLabel(before: TaskProgress, batch: readonly NewEvent[]): string | null {
  for (const e of batch) {
    if (e.type === 'PLAN_COMPLETED' || e.type === 'PLAN_FAILED') return `round ${before.round}`;
    // a tool directive's round is over with its one call's outcome
    if (
      (e.type === 'TOOL_COMPLETED' || e.type === 'TOOL_FAILED') &&
      before.directive?.type === 'tool' &&
      e.payload.call_id === callIdFor(before.round, null)
    )
      return `round ${before.round}`;
  }
  for (const e of batch) {
    if (e.type === 'STEP_COMPLETED' || e.type === 'STEP_FAILED') return `step ${e.payload.step_id}`;
  }
  return null;
}

/** Labels of the checkpoints a person's answer resumes from: they always hold the progress. */
const WAITING_LABELS: ReadonlySet<string> = new Set(['awaiting permission', 'awaiting secret']);

/**
 * Whether a checkpoint at `seq` stores the runtime's progress, the last one
 * that did being at `lastWithProgress` (0: none yet). The progress grows with
 * the task (every call, every history round), so storing it at every round
 * would cost O(events) per round; stored once the task has doubled its events
 * since the last one that holds it, it costs O(1) per event amortised, and
 * loading folds at most as many events as that snapshot covered.
 */
export const storesProgress = (label: string, seq: number, lastWithProgress: number): boolean =>
  WAITING_LABELS.has(label) || seq >= 2 * lastWithProgress;

/**
 * One task writer's checkpoints: a CHECKPOINT_SAVED goes into the same append
 * as the events that call for it (after a round or a plan step, on waiting for
 * a person, every `everyEvents` events), so a checkpoint costs no commit of its
 * own; its snapshot (task state, plus the runtime's progress when
 * `storesProgress` says so) is stored after the commit. A snapshot that fails
 * to store is reported and skipped: loading falls back to the previous one.
 */
export class TaskCheckpoints {
  private lastCheckpointSeq: number;
  /** the last checkpoint this writer stored the progress with; a writer opened on a log stores it first */
  private lastProgressSeq = 0;

  constructor(
    private readonly settings: CheckpointSettings,
    private readonly logger: RuntimeLogger,
    log: readonly RuntimeEvent[],
  ) {
    this.lastCheckpointSeq = log.findLast((e) => e.type === 'CHECKPOINT_SAVED')?.sequence ?? 0;
  }

  /**
   * `batch`, followed by a CHECKPOINT_SAVED when it calls for one. A round's
   * or a step's is left out while the previous checkpoint is not committed
   * (`committedThrough` is before it): a resume starts from what was
   * committed, so of the checkpoints one commit carries only the last could
   * ever be loaded, and the every-N-events one still bounds what a resume folds.
   */
  extend(before: TaskProgress, batch: readonly NewEvent[], committedThrough: number): readonly NewEvent[] {
    const label = checkpointLabel(
      before,
      batch,
      before.last_seq - this.lastCheckpointSeq,
      this.settings.everyEvents,
      this.lastCheckpointSeq <= committedThrough,
    );
    if (label === null) return batch;
    this.lastCheckpointSeq = before.last_seq + batch.length + 1;
    return [
      ...batch,
      {
        type: 'CHECKPOINT_SAVED',
        payload: { checkpoint_id: newId('ckpt'), label, at_sequence: before.last_seq + batch.length },
      },
    ];
  }

  /**
   * The context a CHECKPOINT_SAVED's snapshot stores, taken when `progress` is
   * folded through it: the runtime's progress when `storesProgress` says so,
   * else null.
   */
  context(saved: RuntimeEvent, progress: TaskProgress): unknown {
    if (saved.type !== 'CHECKPOINT_SAVED') return null;
    const withProgress = storesProgress(saved.payload.label, saved.sequence, this.lastProgressSeq);
    // a snapshot that fails to store leaves an older one holding the progress: loading folds a little more
    if (!withProgress) return null;
    this.lastProgressSeq = saved.sequence;
    return progressSnapshot(progress);
  }

  /**
   * Stores the snapshot of a committed CHECKPOINT_SAVED: `context` as taken
   * when it was folded, `state` the task state through it. A failure is
   * reported, never thrown: loading falls back to the previous checkpoint.
   */
  async store(saved: RuntimeEvent, context: unknown, state: TaskState | null): Promise<void> {
    if (saved.type !== 'CHECKPOINT_SAVED') return;
    try {
      await this.settings.store.record(saved, context, state);
    } catch (err) {
      this.logger.warn(
        { task_id: saved.task_id, checkpoint_id: saved.payload.checkpoint_id, err },
        'checkpoint snapshot not stored',
      );
    }
  }
}

/**
 * A task's progress from its latest checkpoint holding one and the events
 * after it (the whole log without a usable checkpoint): the same as a full fold.
 */
export async function loadProgress(
  store: EventStore,
  checkpoints: CheckpointStore | null,
  taskId: string,
): Promise<TaskProgress> {
  const latest = checkpoints ? await checkpoints.latest(taskId, undefined, 'require') : null;
  const base = latest ? progressFromSnapshot(latest.context) : null;
  if (!base || base.last_seq !== latest!.event_sequence) {
    const events = await store.readWholeStream(taskId);
    if (events.length === 0) throw new NotFoundError(`task ${taskId} not found`);
    return foldProgress(taskId, events);
  }
  for (;;) {
    const page = await store.readStream(taskId, { after_seq: base.last_seq, limit: 1000 });
    for (const e of page) evolveProgress(base, e);
    if (page.length < 1000) return base;
  }
}

/** The progress snapshot a checkpoint at the end of `events` holds, for `rebuild` to check stored ones against. */
export const progressContextFold = (taskId: string, events: readonly RuntimeEvent[]): unknown =>
  progressSnapshot(foldProgress(taskId, events));
