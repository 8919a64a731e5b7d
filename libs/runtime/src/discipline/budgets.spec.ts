import { Budgets, emptyUsage, NewEvent, TaskUsage } from '@runledger/contracts';
import {
  activeMs,
  admit,
  costOf,
  firstExceeded,
  meterEvolve,
  meterFromEvents,
  priceModelCalls,
  resolveBudgets,
} from './budgets';
import { estimateUsage } from '../model/usage-estimate';
import { DEFAULT_BUDGET_MAXIMUMS, DEFAULT_BUDGETS, ResolvedBudgets } from './settings';
import { EventLogBuilder } from './testing-events';

const maxima: ResolvedBudgets = { ...DEFAULT_BUDGET_MAXIMUMS, max_rounds: 20, max_cost_usd: 1 };

describe('resolveBudgets', () => {
  it.each<[string, Budgets | undefined, Partial<ResolvedBudgets>, string[]]>([
    ['no request -> defaults', undefined, { max_rounds: 10, max_tool_calls: 50, max_cost_usd: 1 }, []],
    ['a lower request wins', { max_rounds: 3, max_tokens: 1000 }, { max_rounds: 3, max_tokens: 1000 }, []],
    [
      'above the maximum -> the maximum, reported',
      { max_rounds: 500, max_cost_usd: 5 },
      { max_rounds: 20, max_cost_usd: 1 },
      ['max_rounds', 'max_cost_usd'],
    ],
    ['a cost request under the max', { max_cost_usd: 0.25 }, { max_cost_usd: 0.25 }, []],
  ])('%s', (_name, requested, expected, capped) => {
    const sut = resolveBudgets(requested, DEFAULT_BUDGETS, maxima);
    expect(sut.budgets).toMatchObject(expected);
    expect(sut.capped).toEqual(capped);
  });

  it('caps configured defaults too, and leaves cost unlimited when neither sets it', () => {
    const sut = resolveBudgets({}, { ...DEFAULT_BUDGETS, max_rounds: 50 }, DEFAULT_BUDGET_MAXIMUMS);
    expect(sut.budgets.max_rounds).toBe(50);
    expect(
      resolveBudgets({}, { ...DEFAULT_BUDGETS, max_rounds: 500 }, DEFAULT_BUDGET_MAXIMUMS).budgets.max_rounds,
    ).toBe(100);
    expect(sut.budgets.max_cost_usd).toBeNull();
  });
});

describe('token estimate and cost', () => {
  it('estimates 4 characters per token, rounding up, flagged estimated', () => {
    expect(estimateUsage(401, 8)).toEqual({
      prompt_tokens: 101,
      completion_tokens: 2,
      total_tokens: 103,
      estimated: true,
    });
  });
  it.each([
    ['listed model: 1000 x $2.5/M + 500 x $10/M', 'gpt-x', 0.0075],
    ['wildcard price: 1500 x $1/M', 'other', 0.0015],
  ])('%s', (_n, model, usd) => {
    const prices = {
      'gpt-x': { input_per_mtok: 2.5, output_per_mtok: 10 },
      '*': { input_per_mtok: 1, output_per_mtok: 1 },
    };
    expect(costOf(model, { prompt_tokens: 1000, completion_tokens: 500 }, prices)).toBeCloseTo(usd, 12);
  });
  it('an unpriced model costs nothing', () => {
    expect(costOf('local', { prompt_tokens: 10, completion_tokens: 10 }, {})).toBe(0);
  });
});

describe('priceModelCalls: model calls a hook recorded', () => {
  const responded = (model: string, cost_usd?: number): NewEvent => ({
    type: 'MODEL_RESPONDED',
    payload: {
      call_id: 'mc_1',
      role: 'critic',
      model,
      content: '{}',
      usage: { prompt_tokens: 1000, completion_tokens: 100, total_tokens: 1100, estimated: false },
      latency_ms: 1,
      error: null,
      finish_reason: null,
      retry_after_ms: null,
      ...(cost_usd === undefined ? {} : { cost_usd }),
    },
  });
  const prices = { judge: { input_per_mtok: 1000, output_per_mtok: 2000 } };
  const costs = (events: NewEvent[]) =>
    events.map((e) => (e.type === 'MODEL_RESPONDED' ? e.payload.cost_usd : 'other'));

  it('prices an unpriced call of a priced model; leaves priced calls, unpriced models and other events alone', () => {
    const other: NewEvent = {
      type: 'CRITIC_RESULT',
      payload: { target_event_id: null, call_id: null, critic: 'model', score: null, error: 'x' },
    };
    const sut = priceModelCalls(
      [responded('judge'), responded('judge', 0.5), responded('free'), other],
      prices,
    );
    expect(costs(sut)).toEqual([1.2, 0.5, undefined, 'other']);
  });

  it("falls back to the table's '*' price", () => {
    expect(costs(priceModelCalls([responded('any')], { '*': prices.judge }))).toEqual([1.2]);
  });
});

describe('meter fold over the log', () => {
  const log = () =>
    new EventLogBuilder()
      .received()
      .add('MODEL_CALLED', {
        call_id: 'm1',
        role: 'orchestrator',
        model: 'm',
        backend: 'openai',
        attempt: 1,
        round: 1,
        prompt_chars: 400,
      })
      .add('MODEL_RESPONDED', {
        call_id: 'm1',
        role: 'orchestrator',
        model: 'm',
        content: '12345678',
        usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, estimated: false },
        latency_ms: 5,
        error: null,
        finish_reason: 'stop',
        retry_after_ms: null,
        cost_usd: 104,
      })
      .toolRound('file_write', { path: 'a', content: 'x' }, { bytes: 1 })
      .add('MODEL_CALLED', {
        call_id: 'm2',
        role: 'coder',
        model: 'm',
        backend: 'openai',
        attempt: 1,
        round: 1,
        prompt_chars: 10,
      })
      .add('MODEL_RESPONDED', {
        call_id: 'm2',
        role: 'coder',
        model: 'm',
        content: 'abc',
        usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10, estimated: false },
        latency_ms: 5,
        error: null,
        finish_reason: 'stop',
        retry_after_ms: null,
        cost_usd: 13,
      })
      .add('MODEL_CALLED', {
        call_id: 'm3',
        role: 'orchestrator',
        model: 'm',
        backend: 'openai',
        attempt: 1,
        round: 2,
        prompt_chars: 10,
      })
      .add('MODEL_RESPONDED', {
        call_id: 'm3',
        role: 'orchestrator',
        model: 'm',
        content: null,
        usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, estimated: false },
        latency_ms: 5,
        error: { kind: 'rate_limited', message: '429' },
        finish_reason: null,
        retry_after_ms: 1000,
        cost_usd: 0,
      })
      .toolFailed('shell_exec', { command: 'boom' })
      .responded('done');

  it('sums rounds, calls, failures, reported and estimated tokens and recorded cost per task and role', () => {
    const sut = meterFromEvents(log().events);
    expect(sut.usage).toEqual<TaskUsage>({
      rounds: 2,
      tool_calls: 2,
      model_calls: 3,
      failures: 2,
      prompt_tokens: 107,
      completion_tokens: 5,
      total_tokens: 112,
      cost_usd: 107 + 10,
      by_role: {
        orchestrator: { model_calls: 2, prompt_tokens: 100, completion_tokens: 2, cost_usd: 104 },
        coder: { model_calls: 1, prompt_tokens: 7, completion_tokens: 3, cost_usd: 13 },
      },
    });
    expect(sut.pendingCalls).toEqual({});
  });

  it('counts a sys_util answer as a model call that used no tokens (no model ran, so none are estimated)', () => {
    const sut = meterFromEvents(
      new EventLogBuilder()
        .received()
        .add('MODEL_CALLED', {
          call_id: 'm1',
          role: 'orchestrator',
          model: 'sys_util',
          backend: 'sys_util',
          attempt: 1,
          round: 1,
          prompt_chars: 4000,
        })
        .add('MODEL_RESPONDED', {
          call_id: 'm1',
          role: 'orchestrator',
          model: 'sys_util',
          content: '{"type":"respond","content":"a long enough answer to estimate"}',
          usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, estimated: false },
          latency_ms: 1,
          error: null,
          finish_reason: 'stop',
          retry_after_ms: null,
          cost_usd: 0,
        }).events,
    );
    expect(sut.usage).toMatchObject({
      model_calls: 1,
      prompt_tokens: 0,
      completion_tokens: 0,
      total_tokens: 0,
    });
    expect(sut.usage.by_role.orchestrator).toMatchObject({
      model_calls: 1,
      prompt_tokens: 0,
      completion_tokens: 0,
    });
  });

  it('continues from a recorded prefix exactly like a fresh fold (a resumed task meters the same)', () => {
    const events = log().events;
    const sut = events.slice(5).reduce((s, e) => meterEvolve(s, e), meterFromEvents(events.slice(0, 5)));
    expect(sut.usage).toEqual(meterFromEvents(events).usage);
  });
});

describe('budget checks', () => {
  const usage = (patch: Partial<TaskUsage>): TaskUsage => ({ ...emptyUsage(), ...patch });
  const budgets: ResolvedBudgets = {
    ...DEFAULT_BUDGETS,
    max_rounds: 3,
    max_tool_calls: 8,
    max_model_calls: 2,
    max_failures: 1,
    max_tokens: 100,
    max_cost_usd: 0.5,
    timeout_ms: 1000,
  };

  it.each([
    ['time', usage({}), 1001, 'timeout_ms'],
    ['tokens', usage({ total_tokens: 101 }), 0, 'max_tokens'],
    ['cost', usage({ cost_usd: 0.51 }), 0, 'max_cost_usd'],
    ['failures', usage({ failures: 2 }), 0, 'max_failures'],
  ])('over the %s budget', (_n, u, elapsed, key) => {
    expect(firstExceeded(u, budgets, elapsed)).toMatchObject({ budget: key });
  });

  it('usage exactly at every limit is not over', () => {
    expect(firstExceeded(usage({ total_tokens: 100, cost_usd: 0.5, failures: 1 }), budgets, 1000)).toBeNull();
  });

  it.each([
    ['round 4 of 3', usage({ rounds: 3 }), { kind: 'round' as const }, 'max_rounds'],
    ['tool call 9 of 8', usage({ tool_calls: 8 }), { kind: 'tool_call' as const }, 'max_tool_calls'],
    [
      '3rd coder call of 2',
      usage({ by_role: { coder: { model_calls: 2, prompt_tokens: 0, completion_tokens: 0, cost_usd: 0 } } }),
      { kind: 'model_call' as const, role: 'coder' as const },
      'max_model_calls',
    ],
  ])('refuses %s', (_n, u, next, key) => {
    expect(admit(u, budgets, next)).toMatchObject({ budget: key });
  });

  it.each([
    ['round 3 of 3', usage({ rounds: 2 }), { kind: 'round' as const }],
    [
      'tool call 8 of 8 (a legit run of 8 different tool calls)',
      usage({ tool_calls: 7 }),
      { kind: 'tool_call' as const },
    ],
    [
      'the orchestrator, when only the coder used its calls',
      usage({ by_role: { coder: { model_calls: 2, prompt_tokens: 0, completion_tokens: 0, cost_usd: 0 } } }),
      { kind: 'model_call' as const, role: 'orchestrator' as const },
    ],
  ])('admits %s', (_n, u, next) => {
    expect(admit(u, budgets, next)).toBeNull();
  });

  it('measures active time from TASK_RECEIVED; waits for a person do not count', () => {
    const log = new EventLogBuilder().received();
    expect(activeMs(meterFromEvents(log.events), new Date('2026-01-01T00:01:01Z'))).toBe(61_000);
    log
      .add(
        'TASK_AWAITING_PERMISSION',
        { request_id: 'r1', call_id: 'c1', tool: 'x', args: {}, args_hash: 'h', rule: null, reason: 'ask' },
        10_000,
      )
      .add(
        'PERMISSION_RESOLVED',
        { request_id: 'r1', call_id: 'c1', decision: 'allow_once', args_hash: 'h', tool: 'x' },
        3_610_000,
      );
    expect(activeMs(meterFromEvents(log.events), new Date('2026-01-01T01:00:20Z'))).toBe(20_000);
    const waiting = new EventLogBuilder()
      .received()
      .add(
        'TASK_AWAITING_SECRET',
        { request_id: 'r', call_id: 'c', tool: 'x', secret_name: 'S', reason: 'r' },
        5_000,
      );
    expect(activeMs(meterFromEvents(waiting.events), new Date('2026-01-01T02:00:00Z'))).toBe(5_000);
  });
});
