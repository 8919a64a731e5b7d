import { EventPayload, ToolManifest } from '@runledger/contracts';
import { ChatMessage, HistoryItem, PromptView, ToolFunction } from './model/model-backend';
import { toolFunctions, toolTurn } from './native-tool-calls';
import { MemoryHit, MemoryRecall } from './ports';
import { TaskProgress } from './progress';
import { COMPACTED_ROUNDS, PromptItem, decidePrompt } from './discipline/prompt-budget';
import { DEFAULT_CHARS_PER_TOKEN, PromptSettings } from './discipline/settings';
import { estimateTokens } from './discipline/budgets';

export const CONTEXT_SECTIONS = ['system', 'memory', 'tools', 'history', 'user'] as const;
export type ContextSection = (typeof CONTEXT_SECTIONS)[number];

/** Token budget per section; characters are counted at 4 per token. */
export type SectionBudgets = Record<ContextSection, number>;
export const DEFAULT_SECTION_BUDGETS: SectionBudgets = {
  system: 1500,
  memory: 1000,
  tools: 2000,
  history: 4000,
  user: 4000,
};
const CHARS_PER_TOKEN = DEFAULT_CHARS_PER_TOKEN;
const tokensOf = (s: string): number => estimateTokens(s.length);

export const SYSTEM_PROMPT = [
  'You are the orchestrator of Runledger. Decide the next step of the task and reply with ONE JSON object only (no prose):',
  '  {"type":"tool","tool":"<name>","args":{...}}                      call one tool',
  '  {"type":"plan","steps":[{"id":"s1","kind":"tool","tool":"<name>","args":{...},"depends_on":[]}, ...]}',
  '       step kinds: tool, coder (args.prompt for the coder model), memory (args.op insert|search, args.text), respond (args.content);',
  '       a step may use an earlier output as "${steps.<id>.output}"',
  '  {"type":"respond","content":"<final answer>"}                       the task is done',
  '  {"type":"fail","reason":"<why>"}                                     the task cannot be done',
  'Results of earlier steps are under History. Answer with respond once the results answer the task.',
].join('\n');

/** The orchestrator's instructions under native tool calling: the tools travel as `tools`, the answer is plain text. */
export const TOOLS_SYSTEM_PROMPT = [
  'You are the orchestrator of Runledger. Decide the next step of the task:',
  '  call a tool to act (several independent calls in one reply run together);',
  '  call runledger_plan for steps that depend on each other or need the coder, memory or respond;',
  '  call runledger_fail when the task cannot be done;',
  '  reply with text and no tool call only when the task is done: that text is the final answer.',
  'Results of earlier calls come back as tool messages. Answer once the results answer the task.',
].join('\n');

export interface BuiltContext {
  messages: ChatMessage[];
  /** the tools (and the runtime's plan and fail functions) offered to a model that calls them natively */
  functions: ToolFunction[];
  view: PromptView;
  event: EventPayload<'CONTEXT_BUILT'>;
  /** over the prompt budget: these old rounds should be summarised (utility role) and the context built again */
  compaction?: { rounds: number[]; text: string; summaryTokens: number };
  /** cannot fit even trimmed and compacted: the task stops with budget_exceeded */
  overBudget?: string;
}

const isCompactionSummary = (h: HistoryItem): boolean => h.directive === COMPACTED_ROUNDS;

const clip = (s: string, maxChars: number): string =>
  s.length <= maxChars ? s : `${s.slice(0, Math.max(0, maxChars - 14))}…[truncated]`;

const memoryLine = (h: MemoryHit): string => `- (${h.score.toFixed(2)}) ${h.text}`;

const historyText = (h: HistoryItem): string =>
  isCompactionSummary(h)
    ? [`Summary of rounds up to ${h.round}:`, ...h.results.map((r) => `  ${r}`)].join('\n')
    : [`Round ${h.round} directive: ${JSON.stringify(h.directive)}`, ...h.results.map((r) => `  ${r}`)].join(
        '\n',
      );

/**
 * system + memory + tools + history + user, each within its budget. History
 * over budget loses its oldest rounds first (the newest always stays, clipped
 * if it must); CONTEXT_BUILT records what was cut.
 */
export class ContextBuilder {
  constructor(
    private readonly memory: MemoryRecall,
    private readonly budgets: SectionBudgets = DEFAULT_SECTION_BUDGETS,
    private readonly memoryK = 5,
    /** run discipline: fit the whole prompt into the model's window (trim, compact, or over budget) */
    private readonly prompt: PromptSettings | null = null,
  ) {}

  async build(
    progress: TaskProgress,
    round: number,
    tools: readonly ToolManifest[],
    signal?: AbortSignal,
    /** toolCalling: the orchestrator speaks native tool calling, so tools go as functions and decided rounds as tool turns */
    opts: { canCompact?: boolean; toolCalling?: boolean } = {},
  ): Promise<BuiltContext> {
    const cut: string[] = [];
    const sections: EventPayload<'CONTEXT_BUILT'>['sections'] = {};
    const fit = (name: ContextSection, text: string): string => {
      const max = this.budgets[name] * CHARS_PER_TOKEN;
      const out = clip(text, max);
      if (out !== text) cut.push(`${name}:truncated`);
      sections[name] = { tokens: tokensOf(out), trimmed: out === text ? 0 : tokensOf(text) - tokensOf(out) };
      return out;
    };

    let hits = signal?.aborted ? [] : await this.recall(progress);
    const system = fit('system', SYSTEM_PROMPT);
    const toolText = fit(
      'tools',
      tools.map((t) => `- ${t.name}: ${t.description}\n  args: ${JSON.stringify(t.args_schema)}`).join('\n'),
    );

    let kept = [...progress.history];
    const budgetChars = this.budgets.history * CHARS_PER_TOKEN;
    let trimmedTokens = 0;
    let compaction: BuiltContext['compaction'];
    let overBudget: string | undefined;
    if (this.prompt) {
      // The window decides, not the fixed section budgets: trim, compact, or give up.
      const items: PromptItem[] = [
        { id: 'system', section: 'system', tokens: tokensOf(system) },
        { id: 'tools', section: 'tools', tokens: tokensOf(toolText) },
        {
          id: 'user',
          section: 'user',
          tokens: tokensOf(clip(progress.input, this.budgets.user * CHARS_PER_TOKEN)),
        },
        ...hits.map((h) => ({
          id: `memory:${h.id}`,
          section: 'memory' as const,
          tokens: tokensOf(memoryLine(h)),
        })),
        ...kept.map((h) => ({
          id: `history:round_${h.round}`,
          section: 'history' as const,
          tokens: tokensOf(historyText(h)),
        })),
      ];
      const decision = decidePrompt(items, this.prompt, opts.canCompact ?? false);
      if (decision.kind === 'exceed') overBudget = decision.detail;
      const drop = new Set(
        decision.kind === 'trim' || decision.kind === 'compact'
          ? [...decision.drop, ...(decision.kind === 'compact' ? decision.compact : [])]
          : [],
      );
      if (decision.kind === 'compact') {
        const old = kept.filter((h) => drop.has(`history:round_${h.round}`));
        compaction = {
          rounds: old.map((h) => h.round),
          text: old.map(historyText).join('\n'),
          summaryTokens: decision.summaryTokens,
        };
      }
      hits = hits.filter((h) => !drop.has(`memory:${h.id}`));
      for (const h of kept)
        if (drop.has(`history:round_${h.round}`)) trimmedTokens += tokensOf(historyText(h));
      kept = kept.filter((h) => !drop.has(`history:round_${h.round}`));
      cut.push(...[...drop].filter((id) => decision.kind !== 'compact' || !decision.compact.includes(id)));
    }
    const memory = fit('memory', hits.map(memoryLine).join('\n'));

    // Oldest rounds go first; the trimmed count is in tokens like every other section.
    while (!this.prompt && kept.length > 1 && kept.map(historyText).join('\n').length > budgetChars) {
      const dropped = kept.shift()!;
      trimmedTokens += tokensOf(historyText(dropped));
      cut.push(`history:round_${dropped.round}`);
    }
    // Rounds decided by native tool calls go back as tool turns, the rest as text.
    const asTurn = (h: HistoryItem): boolean => Boolean(opts.toolCalling && h.tool_calls?.length);
    const historyFull = kept
      .filter((h) => !asTurn(h))
      .map(historyText)
      .join('\n');
    const history = clip(historyFull, budgetChars);
    if (history !== historyFull) {
      cut.push('history:truncated');
      trimmedTokens += tokensOf(historyFull) - tokensOf(history);
    }
    // Rounds sent as tool turns count in the history section as their text would.
    const turnTokens = kept.filter(asTurn).reduce((n, h) => n + tokensOf(historyText(h)), 0);
    sections.history = { tokens: tokensOf(history) + turnTokens, trimmed: trimmedTokens };
    const user = fit('user', progress.input);

    const body = [
      memory && `## Memory\n${memory}`,
      history && `## History\n${history}`,
      `## Task\n${user}`,
    ].filter(Boolean);
    const messages: ChatMessage[] = opts.toolCalling
      ? [
          { role: 'system', content: TOOLS_SYSTEM_PROMPT },
          { role: 'user', content: body.join('\n\n') },
          ...kept.filter(asTurn).flatMap((h) => toolTurn(h.tool_calls!, h.results)),
        ]
      : [
          { role: 'system', content: toolText ? `${system}\n\n## Tools\n${toolText}` : system },
          { role: 'user', content: body.join('\n\n') },
        ];
    const total = Object.values(sections).reduce((n, s) => n + s.tokens, 0);
    return {
      messages,
      functions: opts.toolCalling ? toolFunctions(tools) : [],
      view: { input: progress.input, history: kept },
      event: {
        round,
        sections,
        total_tokens: total,
        budget_tokens: Object.values(this.budgets).reduce((n, b) => n + b, 0),
        cut,
        memory_hits: hits.map((h) => ({ id: h.id, score: h.score, text: h.text })),
        compacted: kept.some(isCompactionSummary),
      },
      compaction,
      overBudget,
    };
  }

  private async recall(progress: TaskProgress): Promise<MemoryHit[]> {
    try {
      return await this.memory.recall(progress.input, { session_id: progress.session_id, k: this.memoryK });
    } catch {
      // Memory is an aid; a failing index must not stop a task.
      return [];
    }
  }
}
