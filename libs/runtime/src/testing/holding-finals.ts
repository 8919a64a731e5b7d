import { NewEvent } from '@runledger/contracts';
import { AppendOptions, AppendResult, WrappingEventStore } from '@runledger/event-store';

/** Holds every append that ends a task until released, and notes the order those arrive in. */
export class HoldingFinals extends WrappingEventStore {
  readonly arrivals: string[] = [];
  private release!: () => void;
  private readonly held = new Promise<void>((resolve) => (this.release = resolve));

  async append(taskId: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult> {
    if (events.some((e) => e.type === 'TASK_COMPLETED')) {
      this.arrivals.push(`${taskId} final`);
      await this.held;
    }
    return this.inner.append(taskId, events, options);
  }

  releaseAll(): void {
    this.release();
  }
}
