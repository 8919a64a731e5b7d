import { EventPayload, ToolManifest } from '@runledger/contracts';
import { ChatMessage, HistoryItem, PromptView } from './model/model-backend';
import { MemoryHit, MemoryRecall } from './ports';
import { TaskProgress } from './progress';

export const CONTEXT_SECTIONS = ['system', 'memory', 'tools', 'history', 'user'] as const;
export type ContextSection = (typeof CONTEXT_SECTIONS)[number];

/** Token budget per section; characters are counted at 4 per token. */
export type SectionBudgets = Record<ContextSection, number>;
export const DEFAULT_SECTION_BUDGETS: SectionBudgets = { system: 1500, memory: 1000, tools: 2000, history: 4000, user: 4000 };
const CHARS_PER_TOKEN = 4;
const tokensOf = (s: string): number => Math.ceil(s.length / CHARS_PER_TOKEN);

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

export interface BuiltContext {
  messages: ChatMessage[];
  view: PromptView;
  event: EventPayload<'CONTEXT_BUILT'>;
}

const clip = (s: string, maxChars: number): string => (s.length <= maxChars ? s : `${s.slice(0, Math.max(0, maxChars - 14))}…[truncated]`);

const historyText = (h: HistoryItem): string => [`Round ${h.round} directive: ${JSON.stringify(h.directive)}`, ...h.results.map((r) => `  ${r}`)].join('\n');

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
  ) {}

  async build(progress: TaskProgress, round: number, tools: readonly ToolManifest[], signal?: AbortSignal): Promise<BuiltContext> {
    const cut: string[] = [];
    const sections: EventPayload<'CONTEXT_BUILT'>['sections'] = {};
    const fit = (name: ContextSection, text: string): string => {
      const max = this.budgets[name] * CHARS_PER_TOKEN;
      const out = clip(text, max);
      if (out !== text) cut.push(`${name}:truncated`);
      sections[name] = { tokens: tokensOf(out), trimmed: out === text ? 0 : tokensOf(text) - tokensOf(out) };
      return out;
    };

    const hits = signal?.aborted ? [] : await this.recall(progress);
    const system = fit('system', SYSTEM_PROMPT);
    const memory = fit('memory', hits.map((h) => `- (${h.score.toFixed(2)}) ${h.text}`).join('\n'));
    const toolText = fit('tools', tools.map((t) => `- ${t.name}: ${t.description}\n  args: ${JSON.stringify(t.args_schema)}`).join('\n'));

    // Oldest rounds go first; the trimmed count is in tokens like every other section.
    const kept = [...progress.history];
    const budgetChars = this.budgets.history * CHARS_PER_TOKEN;
    let trimmedTokens = 0;
    while (kept.length > 1 && kept.map(historyText).join('\n').length > budgetChars) {
      const dropped = kept.shift()!;
      trimmedTokens += tokensOf(historyText(dropped));
      cut.push(`history:round_${dropped.round}`);
    }
    const historyFull = kept.map(historyText).join('\n');
    const history = clip(historyFull, budgetChars);
    if (history !== historyFull) {
      cut.push('history:truncated');
      trimmedTokens += tokensOf(historyFull) - tokensOf(history);
    }
    sections.history = { tokens: tokensOf(history), trimmed: trimmedTokens };
    const user = fit('user', progress.input);

    const body = [
      memory && `## Memory\n${memory}`,
      history && `## History\n${history}`,
      `## Task\n${user}`,
    ].filter(Boolean);
    const messages: ChatMessage[] = [
      { role: 'system', content: toolText ? `${system}\n\n## Tools\n${toolText}` : system },
      { role: 'user', content: body.join('\n\n') },
    ];
    const total = Object.values(sections).reduce((n, s) => n + s.tokens, 0);
    return {
      messages,
      view: { input: progress.input, history: kept },
      event: {
        round,
        sections,
        total_tokens: total,
        budget_tokens: Object.values(this.budgets).reduce((n, b) => n + b, 0),
        cut,
        memory_hits: hits.map((h) => ({ id: h.id, score: h.score, text: h.text })),
        compacted: false,
      },
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
