import { FailureError } from './failure-error';

export interface DeadlineOptions {
  /** whole request / call */
  totalMs: number;
  /** longest silence between two signs of life (stream chunks); null = no inactivity limit */
  idleMs?: number | null;
  /** outer cancellation (the task's own deadline or a cancel) */
  parent?: AbortSignal;
  /** names the thing timed, for the error message */
  label?: string;
}

export interface Deadline {
  readonly signal: AbortSignal;
  /** a sign of life: restarts the inactivity timer */
  touch(): void;
  /** why it fired: a FailureError of kind timeout, or cancelled when the parent aborted */
  reason(): FailureError | null;
  dispose(): void;
}

/**
 * One abort signal for the layered timeouts of a request: total time,
 * inactivity (a stalled stream), and the parent's signal (task deadline,
 * cancellation). Whichever fires first wins and says why.
 */
export function createDeadline(o: DeadlineOptions): Deadline {
  const controller = new AbortController();
  const label = o.label ?? 'request';
  let why: FailureError | null = null;
  const fire = (err: FailureError) => {
    if (controller.signal.aborted) return;
    why = err;
    controller.abort(err);
  };
  const total = setTimeout(
    () => fire(new FailureError('timeout', `${label} took longer than ${o.totalMs} ms`)),
    o.totalMs,
  );
  let idle: NodeJS.Timeout | null = null;
  const armIdle = () => {
    if (o.idleMs === null || o.idleMs === undefined) return;
    if (idle) clearTimeout(idle);
    idle = setTimeout(
      () => fire(new FailureError('timeout', `${label} sent nothing for ${o.idleMs} ms`)),
      o.idleMs,
    );
  };
  armIdle();
  const onParent = () => {
    const r: unknown = o.parent?.reason;
    fire(r instanceof FailureError ? r : new FailureError('cancelled', `${label} cancelled`));
  };
  if (o.parent?.aborted) onParent();
  else o.parent?.addEventListener('abort', onParent, { once: true });
  return {
    signal: controller.signal,
    touch: () => {
      if (!controller.signal.aborted) armIdle();
    },
    reason: () => why,
    dispose: () => {
      clearTimeout(total);
      if (idle) clearTimeout(idle);
      o.parent?.removeEventListener('abort', onParent);
    },
  };
}
