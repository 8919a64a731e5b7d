import type { EventLoopUtilization } from 'node:perf_hooks';
import { RuntimeEvent, NewEvent, EventType } from '@runledger/contracts';
import type { KeyOwner } from './sealing/sealed-payload';

/** Expected stream version for an append: a sequence number, or a condition. */
/** An archived stretch of the global log, for readers of it who would otherwise see a silent gap. */
export interface ArchivedRange {
  segment_id: string;
  first_position: number;
  last_position: number;
  /** events of the range that are archived (the rest of it are live events of other tasks) */
  event_count: number;
  task_ids: string[];
}

export type ExpectedSequence = number | 'no_stream' | 'stream_exists' | 'any';

/** Who may write a running task: the owner and the epoch its claim got (see LeaseStore). */
export interface LeaseToken {
  owner: string;
  epoch: number;
}

export interface AppendOptions {
  expected: ExpectedSequence;
  /**
   * Fencing: when given, the adapter checks inside the append transaction that
   * this is still the task's current lease (same owner and epoch in
   * `task_leases`) and throws LeaseLostError otherwise, writing nothing.
   * Appends without a lease (a submission, a resolution posted to another
   * instance) are not fenced.
   */
  lease?: LeaseToken;
  /**
   * The appender's own fold of the task's state through these events (TaskWriter), for an inline
   * projection that keeps the same fold (the tasks rows): taken when every event is one the writer
   * checked and folded (writerChecked) and the projection's row stands at `base`.
   */
  folded?: FoldedState;
}

/**
 * A task's state as its writer folded it (state-store's `evolve`) from its state after sequence
 * `base` through the events of an append. Plain data: it crosses to the writer thread.
 */
export interface FoldedState {
  base: number;
  state: unknown;
}

export interface AppendResult {
  /** the sequence the next append to this stream should expect */
  nextExpectedSequence: number;
  /** global positions of the appended (or, for a duplicate event_id, the original) events */
  positions: number[];
  /** the stored events, envelopes filled in */
  events: RuntimeEvent[];
}

export interface ReadStreamOptions {
  after_seq?: number;
  /** no limit when absent */
  limit?: number;
}

export interface ReadAllOptions {
  after_position?: number;
  /** no limit when absent */
  limit?: number;
  types?: readonly EventType[];
  task_id?: string;
  /**
   * Also the events of archived tasks, read from their segments and merged in position order (a
   * rebuild, or a listing that must see every task). Without it only the live table is read, and
   * archivedRanges says what it left out. An adapter without an archive has none to add.
   */
  archived?: boolean;
}

export interface StoreHead {
  /** highest global position ever given, 0 for an empty log (archived events keep theirs) */
  position: number;
  /** events the log holds, live and archived: archiving moves events, it does not take them out of the log */
  event_count: number;
}

/**
 * A stored event as the JSON text a client receives, with what routing it
 * needs, so a replay can send events on without parsing and re-serialising
 * them.
 */
export interface RawEvent {
  position: number;
  sequence: number;
  task_id: string;
  type: EventType;
  /** the RuntimeEvent as JSON: byte for byte `JSON.stringify` of the event `readStream` / `readAll` return */
  json: string;
}

/** What a reader that follows which events there are needs of one: no payload (no parse, no copy). */
export type EventHead = Pick<RuntimeEvent, 'position' | 'sequence' | 'task_id' | 'type'>;

const headOf = ({ position, sequence, task_id, type }: RuntimeEvent): EventHead => ({
  position,
  sequence,
  task_id,
  type,
});

/** An event in hand (a live one, or one an adapter without stored text read) as a RawEvent. */
export const rawEventOf = (e: RuntimeEvent): RawEvent => ({
  position: e.position,
  sequence: e.sequence,
  task_id: e.task_id,
  type: e.type,
  json: JSON.stringify(e),
});

/** Called synchronously right after a transaction commits, with the events it stored, in position order. */
export type CommitListener = (events: readonly RuntimeEvent[]) => void;

/** What writers in this process listed as on its way to the log and not committed yet (see EventStore.handOver). */
export interface HandedOver {
  /** moves at every listing and release: what a reader derived from `events` holds while it stays */
  readonly version: number;
  /**
   * the listed events as their writers folded them, in the order they were first listed; one leaves
   * when its commit is published, before the commit listeners hear it, or when its writer releases it
   */
  readonly events: readonly RuntimeEvent[];
}

/**
 * The append-only log. Port; adapters: InMemoryEventStore (reference),
 * SqliteEventStore. Every adapter passes the same conformance suite
 * (`runEventStoreConformance` in ./testing).
 *
 * Committed events fan out through `onCommitted` (the EventBus registers
 * itself there), so the store never needs to know about the bus.
 */
export abstract class EventStore {
  private readonly commitListeners = new Set<CommitListener>();
  /** handed batches by their first event's id: a batch commits whole, so that id names it at its commit */
  private readonly handedBatches = new Map<string, readonly RuntimeEvent[]>();
  private handed: HandedOver = { version: 0, events: [] };
  private handedChanged = false;

  /**
   * Append events to one task's stream atomically. Validates every event
   * against the catalogue before writing anything. Throws ConcurrencyError when
   * `expected` does not hold; an event whose event_id is already stored is not
   * written again and its original position is returned. Appends arriving
   * together may share one transaction (group commit): each is still checked
   * and written on its own (a later one sees an earlier one's sequence), fails
   * alone, and resolves only once its events are durable and published.
   */
  abstract append(taskId: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult>;
  abstract readStream(taskId: string, options?: ReadStreamOptions): Promise<RuntimeEvent[]>;
  abstract readAll(options?: ReadAllOptions): Promise<RuntimeEvent[]>;
  abstract head(): Promise<StoreHead>;
  /** current last sequence of a stream, 0 when it does not exist */
  abstract streamVersion(taskId: string): Promise<number>;
  abstract close(): Promise<void>;

  /**
   * readStream's events as JSON text, for a replay to send on as they are.
   * This serialises readStream's events; an adapter that stores the event's
   * text overrides it to skip the parse and the re-serialisation.
   */
  async readStreamRaw(taskId: string, options?: ReadStreamOptions): Promise<RawEvent[]> {
    return (await this.readStream(taskId, options)).map(rawEventOf);
  }

  /**
   * The archived stretches of the global log after `after_position` (through `through`), in the
   * order they start, at most `limit` (default 100): readAll reads the live table only, so its
   * reader is told what was moved out instead of seeing a silent gap. An adapter without an archive
   * has none.
   */
  async archivedRanges(_afterPosition: number, _through?: number, _limit?: number): Promise<ArchivedRange[]> {
    return [];
  }

  /** The ranges of these archive segments (a TASKS_ARCHIVED names its segment), in the order they start. */
  async archivedRangesOf(_segmentIds: readonly string[]): Promise<ArchivedRange[]> {
    return [];
  }

  /**
   * Text a read model copies from an owner's events (a checkpoint's snapshot, a task row, a memory
   * entry), as it is to be stored: sealed under the owner's data key (KeyOwner: the task's stream)
   * by an adapter that seals payloads (sealText), so an erasure of its tree or session shreds the
   * copy too. Here, for an owner without a key and for an erased one (whose copies are made from
   * erased events): as it is.
   */
  async sealCopy(_owner: KeyOwner, text: string): Promise<string> {
    return text;
  }

  /** sealCopy's reverse: the text, or null when its owner's key is gone (erased) or missing. */
  async openCopy(text: string): Promise<string | null> {
    return text;
  }

  /** openCopy of each text (null stays null), with one look at the key store for all of them. */
  async openCopies(texts: readonly (string | null)[]): Promise<(string | null)[]> {
    const out: (string | null)[] = [];
    for (const t of texts) out.push(t === null ? null : await this.openCopy(t));
    return out;
  }

  /** readAll's events as JSON text; see readStreamRaw. */
  async readAllRaw(options?: ReadAllOptions): Promise<RawEvent[]> {
    return (await this.readAll(options)).map(rawEventOf);
  }

  /**
   * readAll's events without their payloads, for a reader that follows only which events there
   * are (recovery's list of unfinished tasks). An adapter that stores payloads apart overrides it
   * to leave them unread.
   */
  async readHeads(options?: ReadAllOptions): Promise<EventHead[]> {
    return (await this.readAll(options)).map(headOf);
  }

  /**
   * What an append of `events` will store, for a writer that folds events
   * before it appends them: a store in front of another that changes events on
   * their way in (redaction, a replay's clock) changes them the same way here,
   * so the writer folds what the log will hold. Synchronous; call
   * `readyToPrepare` once first. The default changes nothing.
   */
  prepareAppend(_taskId: string, events: readonly NewEvent[]): readonly NewEvent[] {
    return events;
  }

  /** Loads what `prepareAppend` needs (a wrapper's secrets, say). */
  async readyToPrepare(): Promise<void> {}

  /**
   * How busy the thread the store commits on has been (a cumulative reading,
   * as performance.eventLoopUtilization gives), or null when commits run on
   * the event loop itself or in another process: the time they take is then
   * the loop's own, or nobody's in this process.
   */
  commitThreadUse(): EventLoopUtilization | null {
    return null;
  }

  /**
   * A writer that folds its events before their commit (TaskWriter) names
   * those it will hand to `append`, as it folded them, until the store
   * publishes their commit or they are dropped or refused (the returned
   * release, which a second call leaves as it is). Readers in this process
   * that must not miss a write about to commit see them in `handedOver`:
   * memory's deduplication does, so tasks running side by side do not each
   * store what the other's writes hold. Events listed again under the same
   * first id (a decision taken over by the writer that stages it) keep their
   * place in the list. Not the log: what is listed may still fail; nothing
   * here is ever read back.
   */
  handOver(events: readonly RuntimeEvent[]): () => void {
    const key = events[0]?.event_id;
    if (key === undefined) return () => undefined;
    this.handedBatches.set(key, events);
    this.handedChanged = true;
    return () => {
      // a batch handed again under the same first event (a retry) is the retry's to release
      if (this.handedBatches.get(key) !== events) return;
      this.handedBatches.delete(key);
      this.handedChanged = true;
    };
  }

  /**
   * Takes whatever is listed under these events' ids off the list, whoever listed it: a writer that will
   * not append writes it was handed (its run is over) withdraws what their decisions listed. The store
   * does the same with a commit it publishes, before the listeners hear it, so a reader never finds an
   * event both heard and handed (its writer's release comes a moment later and changes nothing).
   */
  withdraw(events: readonly Pick<RuntimeEvent, 'event_id'>[]): void {
    if (this.handedBatches.size === 0) return;
    for (const e of events) if (this.handedBatches.delete(e.event_id)) this.handedChanged = true;
  }

  /** What is handed over and not settled (see handOver); the same object while nothing changed. */
  handedOver(): HandedOver {
    if (this.handedChanged) {
      this.handedChanged = false;
      this.handed = {
        version: this.handed.version + 1,
        events: [...this.handedBatches.values()].flat(),
      };
    }
    return this.handed;
  }

  /** Register a listener for committed events; returns the function that removes it. */
  onCommitted(listener: CommitListener): () => void {
    this.commitListeners.add(listener);
    return () => this.commitListeners.delete(listener);
  }

  /**
   * Adapters call this after commit, never inside the transaction. A failing
   * listener must not turn a committed append into an error for its writer.
   */
  protected emitCommitted(events: readonly RuntimeEvent[]): void {
    if (events.length === 0) return;
    this.withdraw(events);
    for (const listener of this.commitListeners) {
      try {
        listener(events);
      } catch (err) {
        process.emitWarning(`EventStore commit listener failed: ${(err as Error).message}`);
      }
    }
  }

  /** Every event of a stream, paging through readStream. */
  async readWholeStream(taskId: string, pageSize = 1000): Promise<RuntimeEvent[]> {
    const out: RuntimeEvent[] = [];
    let after = 0;
    for (;;) {
      const page = await this.readStream(taskId, { after_seq: after, limit: pageSize });
      out.push(...page);
      if (page.length < pageSize) return out;
      after = page[page.length - 1].sequence;
    }
  }
}
