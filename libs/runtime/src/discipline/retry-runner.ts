import { EventPayload, NewEvent } from '@runledger/contracts';
import { ClassifiedFailure, FailureDecision, classifyFailure, decideFailure } from './failure-policy';
import { RetrySettings } from './settings';

export type GuardName = EventPayload<'GUARD_TRIGGERED'>['guard'];

/** A GUARD_TRIGGERED event: a guard acted without ending the task. */
export const guardEvent = (
  guard: GuardName,
  round: number | null,
  detail: string,
  data: Record<string, unknown> = {},
): NewEvent => ({
  type: 'GUARD_TRIGGERED',
  payload: { guard, round, detail, data },
});

export type AttemptOutcome<T> =
  | { ok: true; value: T; attempts: number }
  | {
      ok: false;
      failure: ClassifiedFailure;
      decision: Extract<FailureDecision, { action: 'fallback' | 'stop' }>;
      attempts: number;
      error: unknown;
    };

export interface RetryRunOptions {
  subject: 'model' | 'tool';
  retry: RetrySettings;
  fallbacks?: readonly string[];
  idempotent?: boolean;
  circuitOpen?: boolean;
  rng?: () => number;
  signal?: AbortSignal;
  /** errors that are not failures of the request (a bug, a store failure) are rethrown as they are */
  isFailure?: (err: unknown) => boolean;
  /** called with every decision before it is acted on; the caller records it (GUARD_TRIGGERED retry / fallback) */
  onDecision?: (decision: FailureDecision, failure: ClassifiedFailure, attempt: number) => Promise<void>;
}

const wait = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });

/**
 * Run `attempt(n)` (n from 1) until it succeeds or the failure policy says
 * fall back or stop; retries wait the policy's delay. The caller gets the
 * final decision and acts on it; every decision went through onDecision first.
 */
export async function runWithRetries<T>(
  attempt: (n: number) => Promise<T>,
  o: RetryRunOptions,
): Promise<AttemptOutcome<T>> {
  for (let n = 1; ; n++) {
    try {
      return { ok: true, value: await attempt(n), attempts: n };
    } catch (error) {
      if (o.isFailure && !o.isFailure(error)) throw error;
      const failure = o.signal?.aborted
        ? classifyFailure(o.signal.reason ?? error, o.subject)
        : classifyFailure(error, o.subject);
      const decision = decideFailure(failure.kind, n, {
        subject: o.subject,
        retry: o.retry,
        fallbacks: o.fallbacks,
        idempotent: o.idempotent,
        circuitOpen: o.circuitOpen,
        retryAfterMs: failure.retry_after_ms,
        retryable: failure.retryable,
        rng: o.rng,
      });
      await o.onDecision?.(decision, failure, n);
      if (decision.action !== 'retry') return { ok: false, failure, decision, attempts: n, error };
      await wait(decision.delay_ms, o.signal);
    }
  }
}
