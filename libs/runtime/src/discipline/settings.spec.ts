import { DEFAULT_DISCIPLINE_SETTINGS, disciplineSettingsFrom } from './settings';

describe('disciplineSettingsFrom', () => {
  it('uses the built-in defaults when nothing is configured', () => {
    expect(disciplineSettingsFrom({})).toEqual(DEFAULT_DISCIPLINE_SETTINGS);
  });

  it('RUNLEDGER_MAX_ROUNDS is the default and the cap of the round budget; JSON budgets override per key', () => {
    const sut = disciplineSettingsFrom({
      RUNLEDGER_MAX_ROUNDS: 7,
      RUNLEDGER_BUDGET_DEFAULTS: { max_tokens: 5000 },
      RUNLEDGER_BUDGET_MAXIMUMS: { max_cost_usd: 2 },
    });
    expect(sut.budgetDefaults).toMatchObject({ max_rounds: 7, max_tokens: 5000, max_tool_calls: 50 });
    expect(sut.budgetMaximums).toMatchObject({ max_cost_usd: 2, max_rounds: 7, max_tool_calls: 500 });
  });

  it('maps each tuning variable', () => {
    const sut = disciplineSettingsFrom({
      RUNLEDGER_CONTEXT_WINDOW_TOKENS: 4096,
      RUNLEDGER_MODEL_RETRIES: 0,
      RUNLEDGER_REPEAT_THRESHOLD: 4,
      RUNLEDGER_COMPLETION_MAX_MISSES: 2,
    });
    expect(sut.prompt.contextWindowTokens).toBe(4096);
    expect(sut.retry.modelRetries).toBe(0);
    expect(sut.repeatThreshold).toBe(4);
    expect(sut.completionMaxMisses).toBe(2);
  });
});
