import { decidePrompt, PromptItem, promptBudgetTokens } from './prompt-budget';
import { PromptSettings } from './settings';

// 1100-token window, 100 reserved for the completion, 10% margin: 900 prompt tokens.
const settings: PromptSettings = {
  contextWindowTokens: 1100,
  maxTokens: 100,
  safetyMargin: 0.1,
  memoryShare: 0.2,
  keepRecentHistory: 2,
  maxTrimItems: 2,
  summaryTokens: 100,
};

const item = (id: string, section: PromptItem['section'], tokens: number): PromptItem => ({
  id,
  section,
  tokens,
});
const fixed = [item('sys', 'system', 200), item('tools', 'tools', 100), item('user', 'user', 100)]; // 400
const history = (...tokens: number[]) => tokens.map((t, i) => item(`h${i + 1}`, 'history', t));

describe('prompt composition budget', () => {
  it('is the window minus the completion reserve minus the safety margin', () => {
    expect(promptBudgetTokens(settings)).toBe(900);
  });

  it.each<[string, PromptItem[], boolean, Record<string, unknown>]>([
    [
      'everything fits',
      [...fixed, item('m1', 'memory', 100), ...history(100, 100, 100)],
      true,
      { kind: 'fits' },
    ],
    [
      'memory over its 20% share is dropped first, lowest-ranked last',
      [...fixed, item('m1', 'memory', 150), item('m2', 'memory', 150), ...history(100, 100, 100)],
      true,
      { kind: 'trim', drop: ['m2'] },
    ],
    [
      'a little history over: trim the oldest item only',
      [...fixed, ...history(150, 150, 150, 150)],
      true,
      { kind: 'trim', drop: ['h1'] },
    ],
    [
      'much history over: compact everything but the 2 newest',
      [...fixed, ...history(100, 100, 100, 100, 100, 100, 100, 100)],
      true,
      { kind: 'compact', compact: ['h1', 'h2', 'h3', 'h4', 'h5', 'h6'], summaryTokens: 100 },
    ],
    [
      'much history over and no utility model: trim as far as needed',
      [...fixed, ...history(100, 100, 100, 100, 100, 100, 100, 100)],
      false,
      { kind: 'trim', drop: ['h1', 'h2', 'h3'] },
    ],
    [
      'system + tools + user alone overflow: exceed',
      [item('sys', 'system', 800), item('user', 'user', 200)],
      true,
      { kind: 'exceed' },
    ],
    [
      'the newest history alone overflows: exceed',
      [...fixed, ...history(50, 300, 300)],
      true,
      { kind: 'exceed' },
    ],
  ])('%s', (_n, items, canCompact, expected) => {
    const sut = decidePrompt(items, settings, canCompact);
    expect(sut).toMatchObject(expected);
    if (sut.kind !== 'exceed') {
      const used = Object.values(sut.sections).reduce((n, s) => n + s.tokens, 0);
      expect(used).toBeLessThanOrEqual(sut.available);
    } else {
      expect(sut.detail).toMatch(/budget is 900/);
    }
  });

  it('records per section what it cut', () => {
    const sut = decidePrompt([...fixed, ...history(150, 150, 150, 150)], settings);
    expect(sut.kind === 'trim' && sut.sections.history).toEqual({ budget: 500, tokens: 450, trimmed: 1 });
  });
});
