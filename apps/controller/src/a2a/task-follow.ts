import { RuntimeEvent } from '@runledger/contracts';
import { EventSource, followEvents } from '../streaming/follow-events';

/**
 * A task's events after `afterSeq` as an async iterable: replay from the log, then live, no gap and
 * no duplicate (followEvents' guarantee). Ends when the consumer stops or `signal` aborts (the
 * client went away).
 */
export async function* followTask(
  source: EventSource,
  taskId: string,
  afterSeq: number,
  signal: AbortSignal | null,
): AsyncGenerator<RuntimeEvent, void, undefined> {
  const buffered: RuntimeEvent[] = [];
  let wake: (() => void) | null = null;
  let failure: unknown = null;
  let ended = false;
  const notify = () => {
    wake?.();
    wake = null;
  };
  const follow = followEvents(
    source,
    { kind: 'task', task_id: taskId, after_seq: afterSeq },
    (events) => {
      for (const e of events) buffered.push(JSON.parse(e.json) as RuntimeEvent);
      notify();
    },
    {
      onOverflow: (n) => {
        failure = new Error(`the subscriber fell ${n} events behind`);
        notify();
      },
      onError: (err) => {
        failure = err;
        notify();
      },
    },
  );
  void follow.done.then(() => {
    ended = true;
    notify();
  });
  const onAbort = () => follow.stop();
  signal?.addEventListener('abort', onAbort);
  try {
    for (;;) {
      while (buffered.length > 0) yield buffered.shift()!;
      if (failure) throw failure;
      if (ended || signal?.aborted) return;
      await new Promise<void>((resolve) => (wake = resolve));
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    follow.stop();
  }
}
