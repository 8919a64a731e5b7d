import { NewEvent, RuntimeEvent } from '@runledger/contracts';
import {
  AppendOptions,
  AppendResult,
  CommitListener,
  EventStore,
  ReadAllOptions,
  ReadStreamOptions,
  StoreHead,
} from '@runledger/event-store';
import { SessionSecrets } from './session-secrets';

/**
 * The runtime's view of the event store: every append is redacted of the
 * secrets provided in its session before it reaches the log (and so the
 * WebSocket/SSE streams, memory and the model's context, which all read the
 * log). Reads and commit listeners are the inner store's.
 */
export class RedactingEventStore extends EventStore {
  constructor(
    private readonly inner: EventStore,
    private readonly secrets: SessionSecrets,
  ) {
    super();
  }

  async append(taskId: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult> {
    await this.secrets.load(() => this.inner.readAll({ types: ['SECRET_PROVIDED'] }));
    return this.inner.append(taskId, this.secrets.redactEvents(events), options);
  }

  readStream(taskId: string, options?: ReadStreamOptions): Promise<RuntimeEvent[]> {
    return this.inner.readStream(taskId, options);
  }

  readAll(options?: ReadAllOptions): Promise<RuntimeEvent[]> {
    return this.inner.readAll(options);
  }

  head(): Promise<StoreHead> {
    return this.inner.head();
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
