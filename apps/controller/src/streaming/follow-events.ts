import { Observable, Subscription } from 'rxjs';
import { EventType, RuntimeEvent } from '@runledger/contracts';
import { EventBus, EventStore, RawEvent, rawEventOf } from '@runledger/event-store';

export type FollowCursor =
  | { kind: 'task'; task_id: string; after_seq: number }
  | { kind: 'all'; after_position: number; types?: readonly EventType[]; task_id?: string };

export interface FollowOptions {
  pageSize?: number;
  /** live events held while the consumer is busy; beyond this the consumer is too slow */
  maxQueued?: number;
  onOverflow(queued: number): void;
  onError(err: unknown): void;
}

/**
 * Takes the next events, in order, as the JSON text they are stored as: a
 * page of the replay, or the live events that arrived while the consumer was
 * busy. Return 'stop' to end the follow after them (e.g. at a task's final
 * event).
 */
export type Deliver = (events: readonly RawEvent[]) => Promise<void | 'stop'> | void | 'stop';

export interface Follow {
  stop(): void;
  /** resolves when the follow ends (stopped, overflowed or failed) */
  readonly done: Promise<void>;
}

/**
 * Replay from the store, then continue live, in order, with no gap and no
 * duplicate at the seam. The live subscription opens before the first read,
 * so anything committed meanwhile is queued and de-duplicated by sequence
 * (or position). Replayed events go out as the store's JSON text, never
 * parsed and serialised again, a page at a time; live events are serialised
 * once. Delivery awaits the consumer (backpressure): replay is paced by it,
 * and live events wait in a bounded per-follower queue, so one slow consumer
 * never slows the bus or other followers.
 */
export interface EventSource {
  /** every committed event, live, in commit order (hot: no replay) */
  committed$: Observable<RuntimeEvent>;
  readStreamRaw: EventStore['readStreamRaw'];
  readAllRaw: EventStore['readAllRaw'];
}

/** The store's reads and the bus's live events, as followEvents takes them. */
export const eventSourceOf = (store: EventStore, bus: EventBus): EventSource => ({
  committed$: bus.events$,
  readStreamRaw: (taskId, options) => store.readStreamRaw(taskId, options),
  readAllRaw: (options) => store.readAllRaw(options),
});

export function followEvents(
  backend: EventSource,
  cursor: FollowCursor,
  deliver: Deliver,
  options: FollowOptions,
): Follow {
  const pageSize = options.pageSize ?? 500;
  const maxQueued = options.maxQueued ?? 10_000;
  const key = cursor.kind === 'task' ? (e: RawEvent) => e.sequence : (e: RawEvent) => e.position;
  const matches =
    cursor.kind === 'task'
      ? (e: RuntimeEvent) => e.task_id === cursor.task_id
      : (e: RuntimeEvent) =>
          (!cursor.types || cursor.types.includes(e.type)) &&
          (!cursor.task_id || e.task_id === cursor.task_id);
  let last = cursor.kind === 'task' ? cursor.after_seq : cursor.after_position;
  let stopped = false;
  let queue: RuntimeEvent[] = [];
  let wake: (() => void) | null = null;

  const stop = () => {
    if (stopped) return;
    stopped = true;
    live.unsubscribe();
    queue = [];
    wake?.();
  };

  const live: Subscription = backend.committed$.subscribe((e) => {
    if (stopped || !matches(e)) return;
    queue.push(e);
    if (queue.length > maxQueued) {
      const n = queue.length;
      stop();
      options.onOverflow(n);
      return;
    }
    wake?.();
  });

  const readPage = (after: number) =>
    cursor.kind === 'task'
      ? backend.readStreamRaw(cursor.task_id, { after_seq: after, limit: pageSize })
      : backend.readAllRaw({
          after_position: after,
          limit: pageSize,
          types: cursor.types ? [...cursor.types] : undefined,
          task_id: cursor.task_id,
        });

  /** Events come in key order (a page, or the queue in commit order): only those past `last` go out. */
  const emit = async (events: readonly RawEvent[]): Promise<void> => {
    const fresh = events.filter((e) => key(e) > last);
    if (fresh.length === 0) return;
    last = key(fresh[fresh.length - 1]);
    if ((await deliver(fresh)) === 'stop') stop();
  };

  const pump = async () => {
    for (;;) {
      const page = await readPage(last);
      if (stopped) return;
      await emit(page);
      if (page.length < pageSize || stopped) break;
    }
    while (!stopped) {
      if (queue.length > 0) {
        const next = queue;
        queue = [];
        await emit(next.map(rawEventOf));
        continue;
      }
      await new Promise<void>((resolve) => (wake = resolve));
      wake = null;
    }
  };

  const done = pump().catch((err: unknown) => {
    if (stopped) return;
    stop();
    options.onError(err);
  });
  return { stop, done: done.finally(stop) };
}
