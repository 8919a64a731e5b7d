import { Budgets } from '@runledger/contracts';
import { EventLogBuilder } from '../../../discipline/testing-events';
import { DEFAULT_DISCIPLINE_SETTINGS } from '../../../discipline/settings';
import { BudgetGate } from './budget-gate';
import { callOf } from '../../../testing/gate-call';

describe('BudgetGate', () => {
  const sut = new BudgetGate(DEFAULT_DISCIPLINE_SETTINGS);
  let modelCalls = 0;

  /** a task with these budgets whose orchestrator replied once with this usage and (recorded) cost */
  const given = (budgets: Budgets, usage = { prompt_tokens: 400, completion_tokens: 200 }, cost_usd = 0) => {
    const log = new EventLogBuilder();
    log.received('spend', { budgets });
    const call_id = `mc_${++modelCalls}`;
    log.add('MODEL_CALLED', {
      call_id,
      role: 'orchestrator',
      backend: 'scripted',
      model: 'scripted',
      round: 1,
      prompt_chars: 100,
      attempt: 1,
    });
    log.add('MODEL_RESPONDED', {
      call_id,
      role: 'orchestrator',
      model: 'scripted',
      content: '{}',
      usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens, estimated: false },
      latency_ms: 5,
      error: null,
      finish_reason: 'stop',
      retry_after_ms: null,
      cost_usd,
    });
    return log;
  };

  it('given spend within every budget, when a tool is about to run, then it is allowed', () => {
    expect(sut.check(callOf(given({ max_tokens: 1000 }), 'echo'))).toEqual({ kind: 'allow' });
  });

  it('given a reply that crossed the token budget, when its tool is about to run, then the task stops with budget_exceeded', () => {
    expect(sut.check(callOf(given({ max_tokens: 500 }), 'echo'))).toEqual({
      kind: 'hard_stop',
      stop_reason: 'budget_exceeded',
      reason: expect.stringMatching(/used 600 tokens, over the budget of 500/),
      recordFailure: false,
    });
  });

  it('given a reply that crossed the cost budget, when its tool is about to run, then the task stops with budget_exceeded', () => {
    const verdict = sut.check(callOf(given({ max_cost_usd: 0.5 }, undefined, 0.6), 'echo'));
    expect(verdict).toMatchObject({ kind: 'hard_stop', stop_reason: 'budget_exceeded' });
    expect(verdict.kind === 'hard_stop' && verdict.reason).toMatch(
      /cost \$0\.600000, over the budget of \$0\.5/,
    );
  });

  it('given every tool call of the budget used, when another is about to run, then the task stops before it', () => {
    const log = given({ max_tool_calls: 1 }).toolRound('echo', { text: 'a' }, 'a');
    expect(sut.check(callOf(log, 'echo'))).toMatchObject({
      kind: 'hard_stop',
      stop_reason: 'budget_exceeded',
      reason: expect.stringMatching(/all 1 tool calls used/),
    });
  });
});
