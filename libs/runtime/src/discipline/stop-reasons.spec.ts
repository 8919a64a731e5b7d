import { STOP_REASONS } from '@runledger/contracts';
import { describeStop, stopReasonText } from './stop-reasons';

describe('stop reasons', () => {
  it.each(STOP_REASONS.map((r) => [r]))('%s has its own readable sentence', (reason) => {
    expect(stopReasonText(reason)).toMatch(/^[A-Z].+\.$/);
  });
  it('no two reasons read the same', () => {
    expect(new Set(STOP_REASONS.map(stopReasonText)).size).toBe(STOP_REASONS.length);
  });
  it('appends the specifics', () => {
    expect(describeStop('budget_exceeded', 'all 3 rounds used without an answer')).toBe(
      'The task used up one of its budgets (rounds, tool calls, model calls, failures, tokens, cost or time). all 3 rounds used without an answer',
    );
  });
});
