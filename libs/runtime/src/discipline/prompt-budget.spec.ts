import { decidePrompt, fairShare, PromptItem, promptBudgetTokens } from './prompt-budget';
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
  toolOutputShare: 0.5,
};

const item = (id: string, section: PromptItem['section'], tokens: number): PromptItem => ({
  id,
  section,
  tokens,
});
const fixed = [item('sys', 'system', 200), item('tools', 'tools', 100), item('user', 'user', 100)]; // 400
const history = (...tokens: number[]) => tokens.map((t, i) => item(`h${i + 1}`, 'history', t));
/** history rounds of 10 tokens of directive plus one tool output each */
const rounds = (...outputs: number[]): PromptItem[] =>
  outputs.map((o, i) => ({ id: `h${i + 1}`, section: 'history', tokens: 10 + o, elidable: [o] }));

describe('prompt composition budget', () => {
  it('is the window minus the completion reserve minus the safety margin', () => {
    expect(promptBudgetTokens(settings)).toBe(900);
  });

  it.each<[string, PromptItem[], boolean, Record<string, unknown>]>([
    [
      'everything fits',
      [...fixed, item('m1', 'memory', 100), ...history(100, 100, 100)],
      true,
      { kind: 'fits', elideTo: null },
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
      'one tool output over half the history section is elided to that share, nothing dropped',
      [...fixed, ...rounds(90, 90, 450)],
      true,
      { kind: 'trim', drop: [], elideTo: 250 },
    ],
    [
      'older rounds are compacted first: the newest output stays whole',
      [...fixed, ...rounds(90, 90, 90, 90, 90, 90, 90, 230)],
      true,
      {
        kind: 'compact',
        compact: ['h1', 'h2', 'h3', 'h4', 'h5', 'h6'],
        sections: expect.objectContaining({ history: { budget: 500, tokens: 440, trimmed: 6 } }),
      },
    ],
    [
      'the newest rounds alone overflow: the old round is compacted, the newest outputs share the rest',
      [...fixed, ...rounds(40, 280, 280)],
      true,
      { kind: 'compact', compact: ['h1'], summaryTokens: 50, elideTo: 215 },
    ],
    [
      'the newest rounds alone overflow and no utility model: the old round is dropped, the outputs share the rest',
      [...fixed, ...rounds(40, 280, 280)],
      false,
      { kind: 'trim', drop: ['h1'], elideTo: 240 },
    ],
    [
      'a single round of 60 KB of output fits, elided',
      [...fixed, ...rounds(15_000)],
      false,
      { kind: 'trim', drop: [], elideTo: 250 },
    ],
  ])('%s', (_n, items, canCompact, expected) => {
    const sut = decidePrompt(items, settings, canCompact);
    expect(sut).toMatchObject(expected);
    if (sut.kind !== 'exceed') {
      const used = Object.values(sut.sections).reduce((n, s) => n + s.tokens, 0);
      expect(used).toBeLessThanOrEqual(sut.available);
    } else {
      expect(sut.detail).toMatch(/alone need 1000 tokens; the prompt budget is 900/);
    }
  });

  it('records per section what it cut', () => {
    const sut = decidePrompt([...fixed, ...history(150, 150, 150, 150)], settings);
    expect(sut.kind === 'trim' && sut.sections.history).toEqual({ budget: 500, tokens: 450, trimmed: 1 });
  });

  it.each<[number[], number, number | null]>([
    [[10, 20], 100, null],
    [[10, 100, 300], 210, 100],
    [[300, 300], 410, 205],
    [[50], -5, 0],
  ])('fairShare(%j, %d): the largest cap that fits', (parts, space, cap) => {
    expect(fairShare(parts, space)).toBe(cap);
    if (cap !== null)
      expect(parts.reduce((n, p) => n + Math.min(p, cap), 0)).toBeLessThanOrEqual(Math.max(0, space));
  });
});
