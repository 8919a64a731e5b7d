import fc from 'fast-check';
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

/** The decision over a prompt listed whole: its history items go to the budget as the history. */
function decide(items: readonly PromptItem[], canCompact = true) {
  const history = items.filter((i) => i.section === 'history');
  const read: number[] = [];
  const decision = decidePrompt(
    items.filter((i) => i.section !== 'history'),
    {
      length: history.length,
      at: (i) => (read.push(i), history[i]),
      tokens: history.reduce((n, i) => n + i.tokens, 0),
    },
    settings,
    canCompact,
  );
  return { decision, read };
}

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
      { kind: 'trim', drop: ['m2'], removeOldest: 0 },
    ],
    [
      'a little history over: trim the oldest item only',
      [...fixed, ...history(150, 150, 150, 150)],
      true,
      { kind: 'trim', drop: [], removeOldest: 1 },
    ],
    [
      'much history over: compact everything but the 2 newest',
      [...fixed, ...history(100, 100, 100, 100, 100, 100, 100, 100)],
      true,
      { kind: 'compact', removeOldest: 6, summaryTokens: 100 },
    ],
    [
      'much history over and no utility model: trim as far as needed',
      [...fixed, ...history(100, 100, 100, 100, 100, 100, 100, 100)],
      false,
      { kind: 'trim', drop: [], removeOldest: 3 },
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
      { kind: 'trim', drop: [], removeOldest: 0, elideTo: 250 },
    ],
    [
      'older rounds are compacted first: the newest output stays whole',
      [...fixed, ...rounds(90, 90, 90, 90, 90, 90, 90, 230)],
      true,
      {
        kind: 'compact',
        removeOldest: 6,
        sections: expect.objectContaining({ history: { budget: 500, tokens: 440, trimmed: 6 } }),
      },
    ],
    [
      'the newest rounds alone overflow: the old round is compacted, the newest outputs share the rest',
      [...fixed, ...rounds(40, 280, 280)],
      true,
      { kind: 'compact', removeOldest: 1, summaryTokens: 50, elideTo: 215 },
    ],
    [
      'the newest rounds alone overflow and no utility model: the old round is dropped, the outputs share the rest',
      [...fixed, ...rounds(40, 280, 280)],
      false,
      { kind: 'trim', drop: [], removeOldest: 1, elideTo: 240 },
    ],
    [
      'a single round of 60 KB of output fits, elided',
      [...fixed, ...rounds(15_000)],
      false,
      { kind: 'trim', drop: [], removeOldest: 0, elideTo: 250 },
    ],
  ])('%s', (_n, items, canCompact, expected) => {
    const sut = decide(items, canCompact).decision;
    expect(sut).toMatchObject(expected);
    if (sut.kind !== 'exceed') {
      const used = Object.values(sut.sections).reduce((n, s) => n + s.tokens, 0);
      expect(used).toBeLessThanOrEqual(sut.available);
    } else {
      expect(sut.detail).toMatch(/alone need 1000 tokens; the prompt budget is 900/);
    }
  });

  it('records per section what it cut', () => {
    const sut = decide([...fixed, ...history(150, 150, 150, 150)]).decision;
    expect(sut.kind === 'trim' && sut.sections.history).toEqual({ budget: 500, tokens: 450, trimmed: 1 });
  });

  it('reads a long trimmed history from its newest end, as far as the prompt keeps it', () => {
    // 300 rounds of 10 tokens each over a 500-token history section: the newest 50 stay
    const { decision, read } = decide(
      [...fixed, ...history(...Array.from({ length: 300 }, () => 10))],
      false,
    );
    expect(decision).toMatchObject({ kind: 'trim', removeOldest: 250 });
    expect(decision.kind !== 'exceed' && decision.sections.history).toEqual({
      budget: 500,
      tokens: 500,
      trimmed: 250,
    });
    expect(Math.min(...read)).toBe(249);
  });

  it('without a utility model drops exactly the oldest items the history section cannot hold', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 120 }), { maxLength: 60 }), (sizes) => {
        const { decision } = decide([...fixed, ...history(...sizes)], false);
        if (decision.kind === 'fits') return;
        expect(decision.kind).toBe('trim');
        const removed = decision.kind === 'trim' ? decision.removeOldest : -1;
        const suffix = (from: number) => sizes.slice(from).reduce((n, t) => n + t, 0);
        const budget = 500;
        // the newest two always stay; otherwise what is kept fits, and one more would not
        expect(removed).toBeLessThanOrEqual(Math.max(0, sizes.length - 2));
        if (removed < sizes.length - 2) expect(suffix(removed)).toBeLessThanOrEqual(budget);
        if (removed > 0) expect(suffix(removed - 1)).toBeGreaterThan(budget);
      }),
    );
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
