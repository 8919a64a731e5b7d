import { sha256 } from '@runledger/contracts';
import { OutboundDeliveries } from './outbound-deliveries';

/**
 * The callback a task's submission names (`callback_url` on POST /tasks): registered once through
 * the outbound deliveries (format `runledger`) from the task's first event, so every status change is
 * delivered however soon the task moves. Its id follows from the task and the URL: a submission sent
 * again (the same Idempotency-Key) registers it once.
 */
export class TaskCallbacks {
  constructor(private readonly outbound: OutboundDeliveries) {}

  async ensure(taskId: string, url: string, token: string | null): Promise<string> {
    const callback_id = `cb_${sha256(`${taskId}:${url}`).slice(0, 24)}`;
    const known = (await this.outbound.callbacks(taskId)).some((c) => c.callback_id === callback_id);
    if (!known)
      await this.outbound.register({
        task_id: taskId,
        url,
        token,
        format: 'runledger',
        callback_id,
        from_seq: 0,
      });
    return callback_id;
  }
}
