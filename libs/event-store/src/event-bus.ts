import { EventType, RuntimeEvent } from '@runledger/contracts';
import { Observable, Subject, Subscription } from 'rxjs';
import { EventStore } from './event-store';

/** One task's stream from a sequence, or the global log from a position. */
export type SubscribeFilter =
  | { task_id: string; after_seq?: number }
  | { task_id?: undefined; after_position?: number; types?: readonly EventType[] };

const REPLAY_PAGE = 500;

/**
 * Committed events as an rxjs stream. It registers itself with the store's
 * `onCommitted`, so it only ever sees events after their transaction
 * committed, in position order.
 */
export class EventBus {
  private readonly subject = new Subject<RuntimeEvent>();
  private readonly detach: () => void;

  constructor(private readonly store: EventStore) {
    this.detach = store.onCommitted((events) => {
      for (const e of events) this.subject.next(e);
    });
  }

  /** Live committed events only, no replay. */
  get events$(): Observable<RuntimeEvent> {
    return this.subject.asObservable();
  }

  /**
   * Replay from the store, then continue live, with no gap and no duplicate at
   * the seam: live events are buffered from the moment of subscription while
   * the replay pages run, and everything is delivered strictly after the last
   * delivered sequence (stream) or position (global log). Each page is a short
   * read, so a slow subscriber never holds a read transaction open.
   */
  subscribe(filter: SubscribeFilter = {}): Observable<RuntimeEvent> {
    return new Observable<RuntimeEvent>((subscriber) => {
      const byTask = filter.task_id !== undefined;
      const keyOf = (e: RuntimeEvent): number => (byTask ? e.sequence : e.position);
      const matches = (e: RuntimeEvent): boolean =>
        byTask ? e.task_id === filter.task_id : !filter.types || filter.types.includes(e.type);
      let cursor = byTask ? (filter.after_seq ?? 0) : (filter.after_position ?? 0);
      let replaying = true;
      const buffered: RuntimeEvent[] = [];
      const deliver = (e: RuntimeEvent): void => {
        if (keyOf(e) <= cursor || subscriber.closed) return;
        cursor = keyOf(e);
        subscriber.next(e);
      };
      const live: Subscription = this.subject.subscribe({
        next: (e) => {
          if (!matches(e)) return;
          if (replaying) buffered.push(e);
          else deliver(e);
        },
        complete: () => subscriber.complete(),
      });

      const replay = async (): Promise<void> => {
        for (;;) {
          const page = byTask
            ? await this.store.readStream(filter.task_id, { after_seq: cursor, limit: REPLAY_PAGE })
            : await this.store.readAll({ after_position: cursor, limit: REPLAY_PAGE, types: filter.types });
          if (subscriber.closed) return;
          for (const e of page) deliver(e);
          if (page.length < REPLAY_PAGE) break;
        }
        replaying = false;
        for (const e of buffered.splice(0)) deliver(e);
      };
      replay().catch((err: unknown) => subscriber.error(err));
      return () => live.unsubscribe();
    });
  }

  /** Stop fanning out: live subscribers complete. */
  close(): void {
    this.detach();
    this.subject.complete();
  }
}
