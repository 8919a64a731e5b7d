import { FailureError } from '../model/failure-error';
import { runWithRetries } from './retry-runner';
import { RetrySettings } from './settings';

const retry: RetrySettings = {
  modelRetries: 2,
  toolRetries: 1,
  baseDelayMs: 1,
  maxDelayMs: 5,
  maxRetryAfterMs: 50,
};

/** attempt() that fails with the given errors in turn, then answers. */
const scripted = (errors: unknown[]) => {
  const calls: number[] = [];
  return {
    calls,
    attempt: async (n: number) => {
      calls.push(n);
      if (n <= errors.length) throw errors[n - 1];
      return `answer ${n}`;
    },
  };
};

describe('runWithRetries', () => {
  it('500 then success: one retry, recorded', async () => {
    const s = scripted([Object.assign(new Error('boom'), { status: 500 })]);
    const decisions: string[] = [];
    const sut = await runWithRetries(s.attempt, {
      subject: 'model',
      retry,
      rng: () => 0,
      onDecision: async (d) => void decisions.push(d.action),
    });
    expect(sut).toEqual({ ok: true, value: 'answer 2', attempts: 2 });
    expect(decisions).toEqual(['retry']);
  });

  it('429 with Retry-After is waited for, then the retries run out: fallback', async () => {
    const err = new FailureError('rate_limited', '429', 20);
    const s = scripted([err, err, err, err]);
    const started = Date.now();
    const sut = await runWithRetries(s.attempt, { subject: 'model', retry, fallbacks: ['sys_util'] });
    expect(Date.now() - started).toBeGreaterThanOrEqual(38);
    expect(sut).toMatchObject({
      ok: false,
      attempts: 3,
      decision: { action: 'fallback', to: 'sys_util' },
      failure: { kind: 'rate_limited' },
    });
    expect(s.calls).toEqual([1, 2, 3]);
  });

  it('401 stops after the first attempt', async () => {
    const s = scripted([Object.assign(new Error('no'), { status: 401 })]);
    const sut = await runWithRetries(s.attempt, { subject: 'model', retry, fallbacks: ['sys_util'] });
    expect(sut).toMatchObject({
      ok: false,
      attempts: 1,
      decision: { action: 'stop', stop_reason: 'authentication_error' },
    });
  });

  it('a non-idempotent tool is tried once', async () => {
    const s = scripted([new Error('crash'), new Error('crash')]);
    const sut = await runWithRetries(s.attempt, { subject: 'tool', retry, idempotent: false });
    expect(sut).toMatchObject({
      ok: false,
      attempts: 1,
      decision: { action: 'fallback', to: 'orchestrator' },
    });
  });

  it('an idempotent tool is retried toolRetries times', async () => {
    const s = scripted([new Error('crash')]);
    expect(await runWithRetries(s.attempt, { subject: 'tool', retry, idempotent: true })).toMatchObject({
      ok: true,
      attempts: 2,
    });
  });

  it('a cancel during the backoff ends the wait', async () => {
    const ctrl = new AbortController();
    const s = scripted([new FailureError('provider_error', 'x'), new FailureError('provider_error', 'x')]);
    const run = runWithRetries(s.attempt, {
      subject: 'model',
      retry: { ...retry, baseDelayMs: 10_000, maxDelayMs: 10_000 },
      signal: ctrl.signal,
    });
    setTimeout(() => ctrl.abort(new FailureError('cancelled', 'cancelled by user')), 10);
    await expect(run).rejects.toMatchObject({ kind: 'cancelled' });
  });
});
