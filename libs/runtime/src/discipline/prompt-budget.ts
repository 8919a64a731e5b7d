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
  /**
   * Tokens of the item's parts that may be elided (tool outputs of a history
   * round: head and tail kept), included in `tokens`.
   */
  elidable?: readonly number[];
}

export interface SectionUsage {
  /** tokens the section may take */
  budget: number;
  /** tokens it takes after the decision */
  tokens: number;
  /** items removed (trimmed, or replaced by the summary) */
  trimmed: number;
}

/**
 * The most tokens any elidable part keeps (its head and tail, with the
 * elision note); null when no part needs eliding.
 */
type ElideTo = { elideTo: number | null };

/**
 * A task's history as the budget weighs it, oldest first. The decision reads
 * it from its newest end, so a long history costs what the prompt keeps of
 * it, not its length.
 */
export interface PromptHistory {
  readonly length: number;
  at(index: number): PromptItem;
  /** tokens of every item, whole */
  readonly tokens: number;
}

export type PromptDecision =
  | ({
      kind: 'fits';
      available: number;
      total: number;
      sections: Record<PromptSection, SectionUsage>;
    } & ElideTo)
  | ({
      kind: 'trim';
      available: number;
      total: number;
      /** memory items dropped */
      drop: string[];
      /** how many of the oldest history items are dropped */
      removeOldest: number;
      sections: Record<PromptSection, SectionUsage>;
    } & ElideTo)
  | ({
      kind: 'compact';
      available: number;
      total: number;
      /** memory items dropped as in a trim */
      drop: string[];
      /** how many of the oldest history items to summarise into one item of at most summaryTokens, through the utility role */
      removeOldest: number;
      summaryTokens: number;
      sections: Record<PromptSection, SectionUsage>;
    } & ElideTo)
  | { kind: 'exceed'; available: number; total: number; detail: string };

/** Prompt tokens available: the window minus the completion reserve, minus the safety margin. */
export function promptBudgetTokens(
  s: Pick<PromptSettings, 'contextWindowTokens' | 'maxTokens' | 'safetyMargin'>,
): number {
  return Math.max(0, Math.floor((s.contextWindowTokens - s.maxTokens) * (1 - s.safetyMargin)));
}

const sum = (values: readonly number[]): number => values.reduce((n, v) => n + v, 0);
const tokensOf = (items: readonly PromptItem[]): number => sum(items.map((i) => i.tokens));
const partsOf = (item: PromptItem): readonly number[] => item.elidable ?? [];

/** An item's tokens once each of its elidable parts keeps at most `cap` tokens. */
function elidedTokens(item: PromptItem, cap: number | null): number {
  if (cap === null) return item.tokens;
  let tokens = item.tokens;
  for (const part of partsOf(item)) if (part > cap) tokens -= part - cap;
  return tokens;
}

/**
 * The largest cap such that the parts, each cut to at most the cap, take no
 * more than `space` tokens; null when they fit whole. Parts under the cap keep
 * everything, the larger ones share what is left equally.
 */
export function fairShare(parts: readonly number[], space: number): number | null {
  if (sum(parts) <= space) return null;
  const sorted = [...parts].sort((a, b) => a - b);
  let left = Math.max(0, space);
  let i = 0;
  while (i < sorted.length && sorted[i] <= Math.floor(left / (sorted.length - i))) left -= sorted[i++];
  return Math.floor(left / Math.max(1, sorted.length - i));
}

/**
 * Decide how a prompt fits the window. `items` are the prompt's other parts
 * in prompt order, memory items best first; `history` holds its history
 * items, oldest first. System, tools and user input are never cut: when they
 * alone overflow, `exceed` (the task stops with budget_exceeded) is the only
 * answer; everything else is made to fit.
 *
 * Order of remedies: drop memory hits beyond the memory share; when history
 * is over its budget, cut every tool output to its share of the history
 * section (head and tail kept: `elideTo`); then drop a few of the oldest
 * history items (`trim`); when that would take more than maxTrimItems items,
 * summarise the old history instead (`compact`), keeping the newest
 * keepRecentHistory items verbatim. When the newest items still overflow,
 * the old ones go all the same (compacted, or dropped) and the newest items'
 * tool outputs share what is left of the section. `canCompact` is false when
 * no utility model is there to summarise: then trimming takes the place of
 * compaction.
 */
export function decidePrompt(
  items: readonly PromptItem[],
  history: PromptHistory,
  s: PromptSettings,
  canCompact = true,
): PromptDecision {
  const available = promptBudgetTokens(s);
  const total = tokensOf(items) + history.tokens;
  const by = (section: PromptSection): readonly PromptItem[] => items.filter((i) => i.section === section);
  const fixed = tokensOf(by('system')) + tokensOf(by('tools')) + tokensOf(by('user'));
  const memory = by('memory');

  const sections = (
    memoryKept: readonly PromptItem[],
    historyTokens: number,
    historyTrimmed: number,
    historyBudget: number,
  ) => {
    const out = {} as Record<PromptSection, SectionUsage>;
    for (const section of ['system', 'tools', 'user'] as const)
      out[section] = { budget: tokensOf(by(section)), tokens: tokensOf(by(section)), trimmed: 0 };
    out.memory = {
      budget: memoryBudget,
      tokens: tokensOf(memoryKept),
      trimmed: memory.length - memoryKept.length,
    };
    out.history = { budget: historyBudget, tokens: historyTokens, trimmed: historyTrimmed };
    return out;
  };

  if (fixed > available) {
    return {
      kind: 'exceed',
      available,
      total,
      detail: `the system prompt, tool list and user input alone need ${fixed} tokens; the prompt budget is ${available}`,
    };
  }
  const memoryBudget = Math.max(0, Math.min(Math.floor(available * s.memoryShare), available - fixed));
  if (total <= available)
    return {
      kind: 'fits',
      available,
      total,
      elideTo: null,
      sections: sections(memory, history.tokens, 0, Math.max(0, available - fixed - tokensOf(memory))),
    };

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

  // A history over its budget first cuts every tool output down to its share of the section.
  const shareCap = history.tokens > historyBudget ? Math.floor(historyBudget * s.toolOutputShare) : null;
  const sized = (index: number): number => elidedTokens(history.at(index), shareCap);
  const recentCount = Math.min(s.keepRecentHistory, history.length);
  const oldCount = history.length - recentCount;
  let recentTokens = 0;
  for (let i = oldCount; i < history.length; i++) recentTokens += sized(i);

  // Oldest history goes first, as few items as needed: the old items kept are the newest that fit.
  let historyTokens = recentTokens;
  let oldKept = 0;
  while (oldKept < oldCount) {
    const tokens = sized(oldCount - 1 - oldKept);
    if (historyTokens + tokens > historyBudget) break;
    historyTokens += tokens;
    oldKept += 1;
  }
  const droppedHistory = oldCount - oldKept;
  const trimFits = historyTokens <= historyBudget;
  const trim = (): PromptDecision => ({
    kind: 'trim',
    available,
    total,
    drop: droppedMemory,
    removeOldest: droppedHistory,
    elideTo: shareCap,
    sections: sections(memoryKept, historyTokens, droppedHistory, historyBudget),
  });
  if (trimFits && (droppedHistory <= s.maxTrimItems || !canCompact)) return trim();

  /** the old items' tokens, counted only as far as a summary could take */
  const oldTokensUpTo = (limit: number): number => {
    let tokens = 0;
    for (let i = 0; i < oldCount && tokens < limit; i++) tokens += sized(i);
    return Math.min(limit, tokens);
  };
  const summaryTokens = canCompact && oldCount > 0 ? oldTokensUpTo(s.summaryTokens) : 0;
  const compact = (elideTo: number | null, tokens: number): PromptDecision => ({
    kind: 'compact',
    available,
    total,
    drop: droppedMemory,
    removeOldest: oldCount,
    summaryTokens,
    elideTo,
    sections: sections(memoryKept, tokens, oldCount, historyBudget),
  });
  if (canCompact && oldCount > 0 && summaryTokens + recentTokens <= historyBudget)
    return compact(shareCap, summaryTokens + recentTokens);
  // A summary can be larger than what dropping old items leaves; then dropping is the better remedy.
  if (trimFits) return trim();

  // The newest items overflow on their own: the old ones go all the same, and the newest
  // items' tool outputs share what is left. Text that is not a tool output (a directive) and
  // overflows even so is clipped by the context builder to the history budget.
  const newest = Array.from({ length: recentCount }, (_, i) => history.at(oldCount + i));
  const overhead = sum(newest.map((i) => i.tokens - sum(partsOf(i))));
  const parts = newest.flatMap(partsOf);
  const cap = fairShare(parts, historyBudget - summaryTokens - overhead);
  const elideTo = cap === null ? shareCap : Math.min(cap, shareCap ?? cap);
  const tokens = Math.min(historyBudget, summaryTokens + sum(newest.map((i) => elidedTokens(i, elideTo))));
  if (canCompact && oldCount > 0) return compact(elideTo, tokens);
  return {
    kind: 'trim',
    available,
    total,
    drop: droppedMemory,
    removeOldest: oldCount,
    elideTo,
    sections: sections(memoryKept, tokens, oldCount, historyBudget),
  };
}
