import * as fc from 'fast-check';
import { ModelBehaviorError, ValidationError, hashArgs } from '@runledger/contracts';
import {
  adaptiveToolTimeout,
  backoffDelay,
  classifyFailure,
  decideFailure,
  DecideContext,
  isCircuitOpen,
  parseRetryAfter,
  seededRandom,
  toolGuardFromEvents,
} from './failure-policy';
import { FailureError, FailureKind } from '../model/failure-error';
import { RetrySettings } from './settings';
import { EventLogBuilder } from './testing-events';

const httpError = (status: number, headers: Record<string, string> = {}) =>
  Object.assign(new Error(`${status} status code`), { status, headers: new Headers(headers) });
const sysError = (code: string) => Object.assign(new Error(code), { code });
const named = (name: string) => Object.assign(new Error(name), { name });

describe('classifyFailure', () => {
  it.each<[string, unknown, 'model' | 'tool', FailureKind, boolean]>([
    ['401', httpError(401), 'model', 'authentication_error', false],
    ['403', httpError(403), 'model', 'authentication_error', false],
    ['429', httpError(429), 'model', 'rate_limited', true],
    ['500', httpError(500), 'model', 'provider_error', true],
    ['503', httpError(503), 'model', 'provider_error', true],
    ['408', httpError(408), 'model', 'timeout', true],
    ['400 (the request is wrong: not retryable)', httpError(400), 'model', 'provider_error', false],
    ['openai connection timeout', named('APIConnectionTimeoutError'), 'model', 'timeout', true],
    ['DOMException TimeoutError (AbortSignal.timeout)', named('TimeoutError'), 'model', 'timeout', true],
    ['user abort', named('AbortError'), 'model', 'cancelled', false],
    ['ECONNREFUSED', sysError('ECONNREFUSED'), 'model', 'provider_error', true],
    ['ETIMEDOUT', sysError('ETIMEDOUT'), 'model', 'timeout', true],
    ['invalid directive', new ModelBehaviorError('bad json'), 'model', 'validation_error', false],
    ['ValidationError', new ValidationError('bad'), 'model', 'validation_error', false],
    [
      'JSON.parse failure',
      (() => {
        try {
          JSON.parse('{');
        } catch (e) {
          return e;
        }
      })(),
      'model',
      'validation_error',
      false,
    ],
    [
      'a FailureError knows its kind',
      new FailureError('rate_limited', 'scripted'),
      'model',
      'rate_limited',
      true,
    ],
    ['a plain object with kind', { kind: 'timeout' }, 'model', 'timeout', true],
    ['unknown model error', new Error('weird'), 'model', 'provider_error', true],
    ['unknown tool error', new Error('weird'), 'tool', 'tool_error', true],
    ['a thrown string', 'boom', 'tool', 'tool_error', true],
  ])('%s', (_n, err, subject, kind, retryable) => {
    expect(classifyFailure(err, subject)).toMatchObject({ kind, retryable });
  });

  it.each([
    ['seconds', { 'retry-after': '2' }, 2000],
    ['fractional seconds', { 'retry-after': '0.25' }, 250],
    ['the ms header wins', { 'retry-after-ms': '120', 'retry-after': '9' }, 120],
    ['none', {}, null],
  ])('reads Retry-After: %s', (_n, headers, ms) => {
    expect(classifyFailure(httpError(429, headers)).retry_after_ms).toBe(ms);
  });

  it('reads an HTTP-date Retry-After', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:05 GMT', now)).toBe(5000);
    expect(parseRetryAfter('soon', now)).toBeNull();
  });
});

describe('backoff', () => {
  const retry = { baseDelayMs: 100, maxDelayMs: 1000 };
  const settings = fc
    .record({ baseDelayMs: fc.integer({ min: 1, max: 10_000 }), extra: fc.integer({ min: 0, max: 100_000 }) })
    .map(({ baseDelayMs, extra }) => ({ baseDelayMs, maxDelayMs: baseDelayMs + extra }));
  const attempt = fc.integer({ min: 1, max: 40 });
  const jitter = fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true });
  const runs = { seed: 7, numRuns: 300 };

  it('keeps half the capped exponential delay and jitters the other half', () => {
    fc.assert(
      fc.property(settings, attempt, jitter, (s, n, r) => {
        const exp = Math.min(s.maxDelayMs, s.baseDelayMs * 2 ** (n - 1));
        const delay = backoffDelay(n, s, () => r);
        expect(delay).toBeGreaterThanOrEqual(exp / 2);
        expect(delay).toBeLessThanOrEqual(exp);
      }),
      runs,
    );
  });

  it('doubles per attempt until the cap', () => {
    fc.assert(
      fc.property(settings, attempt, jitter, (s, n, r) => {
        fc.pre(s.baseDelayMs * 2 ** n <= s.maxDelayMs);
        const once = backoffDelay(n, s, () => r);
        // each delay is rounded to the millisecond: doubling may be off by the rounding of both
        expect(Math.abs(backoffDelay(n + 1, s, () => r) - 2 * once)).toBeLessThanOrEqual(2);
      }),
      runs,
    );
  });

  it('never waits less than the Retry-After, nor more than it needs to beyond it', () => {
    fc.assert(
      fc.property(settings, attempt, jitter, fc.integer({ min: 0, max: 1_000_000 }), (s, n, r, after) => {
        const delay = backoffDelay(n, s, () => r, after);
        expect(delay).toBe(
          Math.max(
            after,
            backoffDelay(n, s, () => r),
          ),
        );
      }),
      runs,
    );
  });

  it('is reproducible from a seed, whose jitter stays in [0, 1)', () => {
    fc.assert(
      fc.property(fc.integer(), (seed) => {
        const a = [1, 2, 3, 4, 5].map((n) => backoffDelay(n, retry, seededRandom(seed)));
        const b = [1, 2, 3, 4, 5].map((n) => backoffDelay(n, retry, seededRandom(seed)));
        expect(a).toEqual(b);
        const rng = seededRandom(seed);
        const draws = Array.from({ length: 20 }, rng);
        expect(draws.every((x) => x >= 0 && x < 1)).toBe(true);
      }),
      runs,
    );
  });
});

describe('decideFailure', () => {
  const retry: RetrySettings = {
    modelRetries: 2,
    toolRetries: 1,
    baseDelayMs: 100,
    maxDelayMs: 1000,
    maxRetryAfterMs: 5000,
  };
  const model = (patch: Partial<DecideContext> = {}): DecideContext => ({
    subject: 'model',
    retry,
    fallbacks: ['sys_util'],
    rng: () => 0.5,
    ...patch,
  });
  const tool = (patch: Partial<DecideContext> = {}): DecideContext => ({
    subject: 'tool',
    retry,
    rng: () => 0.5,
    ...patch,
  });

  it.each<[string, FailureKind, number, DecideContext, Record<string, unknown>]>([
    [
      '429, first attempt: retry after Retry-After',
      'rate_limited',
      1,
      model({ retryAfterMs: 1500 }),
      { action: 'retry', delay_ms: 1500, next_attempt: 2 },
    ],
    [
      '500, second attempt: retry with backoff',
      'provider_error',
      2,
      model(),
      { action: 'retry', delay_ms: 150, next_attempt: 3 },
    ],
    [
      '500 after all retries: fall back',
      'provider_error',
      3,
      model(),
      { action: 'fallback', to: 'sys_util' },
    ],
    [
      'timeout after all retries and no fallback: stop timeout',
      'timeout',
      3,
      model({ fallbacks: [] }),
      { action: 'stop', stop_reason: 'timeout' },
    ],
    [
      '429 after all retries, no fallback: stop rate_limited',
      'rate_limited',
      3,
      model({ fallbacks: [] }),
      { action: 'stop', stop_reason: 'rate_limited' },
    ],
    [
      'Retry-After longer than we wait: fall back at once',
      'rate_limited',
      1,
      model({ retryAfterMs: 60_000 }),
      { action: 'fallback', to: 'sys_util' },
    ],
    [
      'non-retryable 400: fall back at once',
      'provider_error',
      1,
      model({ retryable: false }),
      { action: 'fallback' },
    ],
    [
      '401: stop at once, even with a fallback',
      'authentication_error',
      1,
      model(),
      { action: 'stop', stop_reason: 'authentication_error' },
    ],
    [
      'invalid directive: never retried, falls back',
      'validation_error',
      1,
      model(),
      { action: 'fallback', to: 'sys_util' },
    ],
    [
      'invalid directive, no fallback: stop',
      'validation_error',
      1,
      model({ fallbacks: [] }),
      { action: 'stop', stop_reason: 'validation_error' },
    ],
    ['budget', 'budget_exceeded', 1, model(), { action: 'stop', stop_reason: 'budget_exceeded' }],
    ['cancel', 'cancelled', 1, model(), { action: 'stop', stop_reason: 'cancelled' }],
    [
      'idempotent tool, first failure: retry',
      'tool_error',
      1,
      tool({ idempotent: true }),
      { action: 'retry', next_attempt: 2 },
    ],
    ['idempotent tool timeout: retry', 'timeout', 1, tool({ idempotent: true }), { action: 'retry' }],
    [
      'idempotent tool out of retries: the orchestrator is told',
      'tool_error',
      2,
      tool({ idempotent: true }),
      { action: 'fallback', to: 'orchestrator' },
    ],
    [
      'non-idempotent tool: never retried',
      'tool_error',
      1,
      tool({ idempotent: false }),
      { action: 'fallback', to: 'orchestrator' },
    ],
    [
      'open circuit: stop tool_error',
      'tool_error',
      1,
      tool({ idempotent: true, circuitOpen: true }),
      { action: 'stop', stop_reason: 'tool_error' },
    ],
  ])('%s', (_n, kind, attempt, ctx, expected) => {
    expect(decideFailure(kind, attempt, ctx)).toMatchObject(expected);
  });
});

describe('tool guards folded from the log', () => {
  it('opens the circuit after 3 consecutive breakages of one tool', () => {
    const log = new EventLogBuilder().received();
    log.toolFailed('net_fetch', { url: 'a' }).toolFailed('net_fetch', { url: 'b' });
    expect(isCircuitOpen(toolGuardFromEvents(log.events), 'net_fetch', 3)).toBe(false);
    log.tool('net_fetch', { url: 'c' }, null, false);
    expect(isCircuitOpen(toolGuardFromEvents(log.events), 'net_fetch', 3)).toBe(true);
  });

  it('a success in between closes it; non-zero exits, refusals and other tools do not count', () => {
    const log = new EventLogBuilder().received();
    log
      .toolFailed('net_fetch', { url: 'a' })
      .toolFailed('net_fetch', { url: 'b' })
      .tool('net_fetch', { url: 'c' }, 'ok');
    log.toolFailed('net_fetch', { url: 'd' }).toolFailed('net_fetch', { url: 'e' }, 'permission_denied');
    for (let i = 0; i < 5; i++)
      log.tool('shell_exec', { command: 'npm test' }, { exit_code: 1, stdout: 'fail' }, false);
    log.toolFailed('file_write', { path: 'x' });
    const sut = toolGuardFromEvents(log.events);
    expect(isCircuitOpen(sut, 'net_fetch', 3)).toBe(false);
    expect(isCircuitOpen(sut, 'shell_exec', 3)).toBe(false);
  });

  it('backs off the timeout per tool signature after each timeout, capped', () => {
    const args = { command: 'sleep 100' };
    const log = new EventLogBuilder().received().toolFailed('shell_exec', args, 'timeout');
    const sig = hashArgs('shell_exec', args);
    expect(adaptiveToolTimeout(toolGuardFromEvents(log.events), sig, 1000, 2, 3000)).toBe(2000);
    log.toolFailed('shell_exec', args, 'timeout');
    expect(adaptiveToolTimeout(toolGuardFromEvents(log.events), sig, 1000, 2, 3000)).toBe(3000);
    expect(adaptiveToolTimeout(toolGuardFromEvents(log.events), 'other-signature', 1000, 2, 3000)).toBe(1000);
  });
});
