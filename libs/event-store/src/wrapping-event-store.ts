import type { KeyOwner } from './sealing/sealed-payload';
import type { ArchivedRange } from './archive/archived-streams';
import type { EventLoopUtilization } from 'node:perf_hooks';
import { NewEvent, RuntimeEvent } from '@runledger/contracts';
import {
  AppendOptions,
  AppendResult,
  CommitListener,
  EventHead,
  EventStore,
  HandedOver,
  RawEvent,
  ReadAllOptions,
  ReadStreamOptions,
  StoreHead,
} from './event-store';

/**
 * An EventStore in front of another that changes only what is written (the subclass's `append`);
 * reads, the head, close and commit listeners are the inner store's, so the inner store stays the
 * one place that emits committed events.
 */
export abstract class WrappingEventStore extends EventStore {
  constructor(protected readonly inner: EventStore) {
    super();
  }

  abstract override append(
    taskId: string,
    events: readonly NewEvent[],
    options: AppendOptions,
  ): Promise<AppendResult>;

  override prepareAppend(taskId: string, events: readonly NewEvent[]): readonly NewEvent[] {
    return this.inner.prepareAppend(taskId, events);
  }

  override readyToPrepare(): Promise<void> {
    return this.inner.readyToPrepare();
  }

  override handOver(events: readonly RuntimeEvent[]): () => void {
    return this.inner.handOver(events);
  }

  override handedOver(): HandedOver {
    return this.inner.handedOver();
  }

  override withdraw(events: readonly Pick<RuntimeEvent, 'event_id'>[]): void {
    this.inner.withdraw(events);
  }

  override commitThreadUse(): EventLoopUtilization | null {
    return this.inner.commitThreadUse();
  }

  readStream(taskId: string, options?: ReadStreamOptions): Promise<RuntimeEvent[]> {
    return this.inner.readStream(taskId, options);
  }

  readAll(options?: ReadAllOptions): Promise<RuntimeEvent[]> {
    return this.inner.readAll(options);
  }

  override readStreamRaw(taskId: string, options?: ReadStreamOptions): Promise<RawEvent[]> {
    return this.inner.readStreamRaw(taskId, options);
  }

  override sealCopy(owner: KeyOwner, text: string): Promise<string> {
    return this.inner.sealCopy(owner, text);
  }

  override openCopy(text: string): Promise<string | null> {
    return this.inner.openCopy(text);
  }

  override openCopies(texts: readonly (string | null)[]): Promise<(string | null)[]> {
    return this.inner.openCopies(texts);
  }

  override readAllRaw(options?: ReadAllOptions): Promise<RawEvent[]> {
    return this.inner.readAllRaw(options);
  }

  override readHeads(options?: ReadAllOptions): Promise<EventHead[]> {
    return this.inner.readHeads(options);
  }

  head(): Promise<StoreHead> {
    return this.inner.head();
  }

  override archivedRanges(afterPosition: number, through?: number, limit?: number): Promise<ArchivedRange[]> {
    return this.inner.archivedRanges(afterPosition, through, limit);
  }

  override archivedRangesOf(segmentIds: readonly string[]): Promise<ArchivedRange[]> {
    return this.inner.archivedRangesOf(segmentIds);
  }

  streamVersion(taskId: string): Promise<number> {
    return this.inner.streamVersion(taskId);
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  override onCommitted(listener: CommitListener): () => void {
    return this.inner.onCommitted(listener);
  }
}
