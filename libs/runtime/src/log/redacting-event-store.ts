import { NewEvent } from '@runledger/contracts';
import { AppendOptions, AppendResult, EventStore, WrappingEventStore } from '@runledger/event-store';
import { SessionSecrets } from './session-secrets';

/**
 * The runtime's view of the event store: every append is redacted of the
 * secrets provided in its session before it reaches the log (and so the
 * WebSocket/SSE streams, memory and the model's context, which all read the
 * log). Reads and commit listeners are the inner store's.
 */
export class RedactingEventStore extends WrappingEventStore {
  constructor(
    inner: EventStore,
    private readonly secrets: SessionSecrets,
  ) {
    super(inner);
  }

  async append(taskId: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult> {
    await this.loadSecrets();
    return this.inner.append(taskId, this.secrets.redactEvents(events), options);
  }

  override prepareAppend(taskId: string, events: readonly NewEvent[]): readonly NewEvent[] {
    return this.inner.prepareAppend(taskId, this.secrets.redactEvents(events));
  }

  override async readyToPrepare(): Promise<void> {
    await this.loadSecrets();
    await this.inner.readyToPrepare();
  }

  private loadSecrets(): Promise<void> {
    return this.secrets.load(() => this.inner.readAll({ types: ['SECRET_PROVIDED'] }));
  }
}
