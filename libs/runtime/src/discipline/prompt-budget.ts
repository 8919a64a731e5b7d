import { PromptSettings } from './settings';

/** The directive marker of a history item that summarises compacted rounds. */
export const COMPACTED_ROUNDS = 'compacted_rounds';

export const COMPACTION_SYSTEM =
  'Summarise the earlier rounds of an agent below for the agent itself. Keep every fact it will need: ' +
  'what was done, tool results, file names, errors, open questions. No advice, no preamble.';

export const PROMPT_SECTIONS = ['system', 'memory', 'history', 'tools', 'user'] as const;
export type PromptSection = (typeof PROMPT_SECTIONS)[number];

export interface PromptItem {
  id: string;
  section: PromptSection;
  tokens: number;
}

export interface SectionUsage {
  /** tokens the section may take */
  budget: number;
  /** tokens it takes after the decision */
  tokens: number;
  /** items removed (trimmed, or replaced by the summary) */
  trimmed: number;
}

export type PromptDecision =
  | { kind: 'fits'; available: number; total: number; sections: Record<PromptSection, SectionUsage> }
  | {
      kind: 'trim';
      available: number;
      total: number;
      drop: string[];
      sections: Record<PromptSection, SectionUsage>;
    }
  | {
      kind: 'compact';
      available: number;
      total: number;
      /** memory items dropped as in a trim */
      drop: string[];
      /** old history items to summarise into one item of at most summaryTokens, through the utility role */
      compact: string[];
      summaryTokens: number;
      sections: Record<PromptSection, SectionUsage>;
    }
  | { kind: 'exceed'; available: number; total: number; detail: string };

/** Prompt tokens available: the window minus the completion reserve, minus the safety margin. */
export function promptBudgetTokens(
  s: Pick<PromptSettings, 'contextWindowTokens' | 'maxTokens' | 'safetyMargin'>,
): number {
  return Math.max(0, Math.floor((s.contextWindowTokens - s.maxTokens) * (1 - s.safetyMargin)));
}

const sum = (items: readonly PromptItem[]): number => items.reduce((n, i) => n + i.tokens, 0);

/**
 * Decide how a prompt fits the window. Items come in prompt order: memory
 * items best first, history items oldest first. System, tools and user input
 * are never cut; when they alone overflow, only `exceed` is left.
 *
 * Order of remedies: drop memory hits beyond the memory share, then drop a few
 * of the oldest history items (`trim`); when that would take more than
 * maxTrimItems items, summarise the old history instead (`compact`), keeping
 * the newest keepRecentHistory items verbatim; if even that does not fit,
 * `exceed` (the task stops with budget_exceeded). `canCompact` is false when
 * no utility model is there to summarise: then trimming may go as far as the
 * kept recent items.
 */
export function decidePrompt(
  items: readonly PromptItem[],
  s: PromptSettings,
  canCompact = true,
): PromptDecision {
  const available = promptBudgetTokens(s);
  const total = sum(items);
  const by = (section: PromptSection) => items.filter((i) => i.section === section);
  const fixed = sum(by('system')) + sum(by('tools')) + sum(by('user'));
  const memory = by('memory');
  const history = by('history');

  const sections = (
    memoryKept: readonly PromptItem[],
    historyTokens: number,
    historyTrimmed: number,
    historyBudget: number,
  ) => {
    const out = {} as Record<PromptSection, SectionUsage>;
    for (const section of ['system', 'tools', 'user'] as const)
      out[section] = { budget: sum(by(section)), tokens: sum(by(section)), trimmed: 0 };
    out.memory = {
      budget: memoryBudget,
      tokens: sum(memoryKept),
      trimmed: memory.length - memoryKept.length,
    };
    out.history = { budget: historyBudget, tokens: historyTokens, trimmed: historyTrimmed };
    return out;
  };

  const memoryBudget = Math.max(0, Math.min(Math.floor(available * s.memoryShare), available - fixed));
  if (total <= available)
    return {
      kind: 'fits',
      available,
      total,
      sections: sections(memory, sum(history), 0, Math.max(0, available - fixed - sum(memory))),
    };
  if (fixed > available) {
    return {
      kind: 'exceed',
      available,
      total,
      detail: `system, tools and user input need ${fixed} tokens, the prompt budget is ${available}`,
    };
  }

  // Memory beyond its share goes first, lowest-ranked first.
  const memoryKept: PromptItem[] = [];
  let memoryTokens = 0;
  for (const item of memory) {
    if (memoryTokens + item.tokens > memoryBudget) continue;
    memoryKept.push(item);
    memoryTokens += item.tokens;
  }
  const droppedMemory = memory.filter((m) => !memoryKept.includes(m)).map((m) => m.id);
  const historyBudget = available - fixed - memoryTokens;

  const recentCount = Math.min(s.keepRecentHistory, history.length);
  const old = history.slice(0, history.length - recentCount);
  const recent = history.slice(history.length - recentCount);

  // Oldest history first, as few items as needed.
  let historyTokens = sum(history);
  const droppedHistory: string[] = [];
  for (const item of old) {
    if (historyTokens <= historyBudget) break;
    droppedHistory.push(item.id);
    historyTokens -= item.tokens;
  }
  const trimFits = historyTokens <= historyBudget;
  const trim = (): PromptDecision => ({
    kind: 'trim',
    available,
    total,
    drop: [...droppedMemory, ...droppedHistory],
    sections: sections(memoryKept, historyTokens, droppedHistory.length, historyBudget),
  });
  if (trimFits && (droppedHistory.length <= s.maxTrimItems || !canCompact)) return trim();

  if (canCompact && old.length > 0) {
    const summaryTokens = Math.min(s.summaryTokens, sum(old));
    const compactedTokens = summaryTokens + sum(recent);
    if (compactedTokens <= historyBudget) {
      return {
        kind: 'compact',
        available,
        total,
        drop: droppedMemory,
        compact: old.map((i) => i.id),
        summaryTokens,
        sections: sections(memoryKept, compactedTokens, old.length, historyBudget),
      };
    }
  }
  // A summary can be larger than what dropping old items leaves; then dropping is the better remedy.
  if (trimFits) return trim();
  const summary = canCompact && old.length > 0 ? Math.min(s.summaryTokens, sum(old)) : 0;
  return {
    kind: 'exceed',
    available,
    total,
    detail: `the prompt needs ${fixed + memoryTokens + summary + sum(recent)} tokens with all old history ${canCompact ? 'compacted' : 'dropped'}; the budget is ${available}`,
  };
}
