import { EventStore } from '@runledger/event-store';

const PAGE = 1000;

/**
 * The tasks the log shows received and not ended. The first look reads the
 * whole log (those event types only); every later one reads only what was
 * appended since, so a periodic crash-recovery sweep stays cheap on a long log.
 */
export class UnfinishedTasks {
  private readonly open = new Set<string>();
  private after = 0;

  constructor(private readonly store: EventStore) {}

  async list(): Promise<string[]> {
    for (;;) {
      const page = await this.store.readAll({
        after_position: this.after,
        limit: PAGE,
        types: ['TASK_RECEIVED', 'TASK_COMPLETED', 'TASK_FAILED', 'TASK_CANCELLED'],
      });
      for (const e of page) {
        if (e.type === 'TASK_RECEIVED') this.open.add(e.task_id);
        else this.open.delete(e.task_id);
      }
      if (page.length > 0) this.after = page[page.length - 1].position;
      if (page.length < PAGE) return [...this.open];
    }
  }
}
