import { AgentProfile, EventPayload, ToolManifest } from '@runledger/contracts';
import { agentLines } from '../delegation/agent-catalog';
import { ChatMessage, HistoryItem, PromptView, ToolFunction } from '../model/model-backend';
import { delegateFunction, timeFunctions, toolFunctions, toolTurn } from './native-tool-calls';
import { MemoryHit, MemoryRecall } from '../ports';
import { TaskProgress } from '../log/progress';
import {
  COMPACTED_ROUNDS,
  PromptHistory,
  PromptItem,
  decidePrompt,
  promptBudgetTokens,
} from '../discipline/prompt-budget';
import { PromptSettings } from '../discipline/settings';
import { DEFAULT_CHARS_PER_TOKEN } from '../model/usage-estimate';
import { estimateTokens } from '../model/usage-estimate';
import { isSessionItem, sessionTaskOf } from '../log/session-history';
import { SessionPressure } from '../discipline/session-budget';
import { TODO_UPDATE_LINE, todoSection, todosInPlay } from '../discipline/todos';

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

/** Said in an answer_only round (round policy). */
export const ANSWER_ONLY_NOTE =
  'This round is answer only: no tool may be called. Answer the task from the results above (JSON protocol: a respond directive).';

/** Said of plans when todos are part of the task. */
const PLAN_TODOS_PROMPT =
  '  a plan may carry "todos":[{"id":"t1","text":"<what>","required":true}]; move each along with the todo_update tool.';

/** The JSON protocol's delegation line and the agents it may name. */
const delegationPrompt = (agents: readonly AgentProfile[]): string =>
  [
    '  {"type":"delegate","agent":"<name>","input":"<the task for it>"}        hand a self-contained part to an agent (a task of its own);',
    '       in a plan: a step of kind agent with args {"agent","input"}; agent steps without dependencies run at the same time. Agents:',
    ...agentLines(agents)
      .split('\n')
      .map((l) => `       ${l}`),
  ].join('\n');

/** A delegated task's own instructions, before the orchestrator's. */
const agentPreamble = (agent: AgentProfile | null): string =>
  agent
    ? `You work as the ${agent.name} agent, on a task another agent gave you.${agent.instructions ? `\n${agent.instructions}` : ''}\n\n`
    : '';

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
  /** answer_only round: the model may not call tools (natively: tool_choice none) */
  toolChoice?: 'none';
  /**
   * over the prompt budget, or near the session budget (`reason`): these old rounds should be
   * summarised (utility role) and the context built again
   */
  compaction?: { rounds: number[]; text: string; summaryTokens: number; reason?: 'session_budget' };
  /** cannot fit even trimmed and compacted: the task stops with budget_exceeded */
  overBudget?: string;
}

const isCompactionSummary = (h: HistoryItem): boolean => h.directive === COMPACTED_ROUNDS;

const clip = (s: string, maxChars: number): string =>
  s.length <= maxChars ? s : `${s.slice(0, Math.max(0, maxChars - 14))}…[truncated]`;

const isHighSurrogate = (code: number): boolean => code >= 0xd800 && code <= 0xdbff;
const isLowSurrogate = (code: number): boolean => code >= 0xdc00 && code <= 0xdfff;

/**
 * A tool output cut to at most maxChars: its head and tail kept, with a note
 * of how many bytes went and which event holds the whole output. A surrogate
 * pair is never split.
 */
export function elideOutput(text: string, maxChars: number, sourceEventId: string | null): string {
  if (text.length <= maxChars) return text;
  const note = (bytes: number) =>
    `\n[… ${bytes} bytes elided${sourceEventId ? `; whole output in event ${sourceEventId}` : ''} …]\n`;
  // sized with the longest count the note can show, so the result stays within maxChars
  const room = Math.max(0, maxChars - note(Buffer.byteLength(text)).length);
  let headEnd = Math.ceil(room / 2);
  let tailStart = text.length - Math.floor(room / 2);
  if (headEnd > 0 && isHighSurrogate(text.charCodeAt(headEnd - 1))) headEnd -= 1;
  if (tailStart < text.length && isLowSurrogate(text.charCodeAt(tailStart))) tailStart += 1;
  return `${text.slice(0, headEnd)}${note(Buffer.byteLength(text.slice(headEnd, tailStart)))}${text.slice(tailStart)}`;
}

/**
 * A history item with every result over maxChars elided (citing the event it
 * came from); the item itself when none is, so its cached rendering still serves.
 */
function elideItem(h: HistoryItem, maxChars: number): HistoryItem {
  if (h.results.every((r) => r.length <= maxChars)) return h;
  return { ...h, results: h.results.map((r, i) => elideOutput(r, maxChars, h.sources?.[i] ?? null)) };
}

const memoryLine = (h: MemoryHit): string => `- (${h.score.toFixed(2)}) ${h.text}`;

const historyHeading = (h: HistoryItem): string => {
  if (isCompactionSummary(h))
    return isSessionItem(h)
      ? 'Summary of earlier tasks of this session:'
      : `Summary of rounds up to ${h.round}:`;
  const sessionTask = sessionTaskOf(h);
  return sessionTask !== null
    ? `Earlier task of this session (${sessionTask}):`
    : `Round ${h.round} directive: ${JSON.stringify(h.directive)}`;
};

const historyText = (h: HistoryItem): string =>
  [historyHeading(h), ...h.results.map((r) => `  ${r}`)].join('\n');

/** How CONTEXT_BUILT names a history item: a round of the task, or an earlier task of its session. */
const HISTORY_ID_PREFIX = 'history:';
const historyId = (h: HistoryItem): string =>
  `${HISTORY_ID_PREFIX}${isSessionItem(h) ? `session_${-h.round}` : `round_${h.round}`}`;

/**
 * The oldest `count` items of a history as CONTEXT_BUILT records them left
 * out: one or two by id, a longer run by its first and last ids, so a long
 * task's every round does not repeat its whole past.
 */
function removedCut(history: readonly HistoryItem[], count: number): string[] {
  if (count <= 2) return history.slice(0, count).map(historyId);
  return [`${historyId(history[0])}..${historyId(history[count - 1]).slice(HISTORY_ID_PREFIX.length)}`];
}

/** Said where earlier tasks of the session were left out of the prompt (trimmed, not summarised). */
const sessionOmittedNote = (n: number): string =>
  `[… ${n} earlier task${n === 1 ? '' : 's'} of this session left out to fit the prompt …]`;

/** A history item as the prompt shows it, with what the prompt budget weighs of it. */
interface RenderedHistory {
  /** the results array rendered, and how many results it held then: the item changes only by appending results */
  readonly results: readonly string[];
  readonly count: number;
  readonly text: string;
  readonly tokens: number;
  readonly item: PromptItem;
}

/**
 * Renderings of history items, kept across rounds: a round renders only the
 * items that are new or grew since the last one instead of the task's whole
 * history, and shows the same text. Keyed by the item itself (the progress
 * owns them; a compaction replaces them), so items gone are forgotten.
 */
class HistoryRenderings {
  private readonly cache = new WeakMap<HistoryItem, RenderedHistory>();
  /** per history: tokens of its first i items, for every item but the newest */
  private readonly sums = new WeakMap<readonly HistoryItem[], number[]>();

  of(h: HistoryItem): RenderedHistory {
    const hit = this.cache.get(h);
    if (hit && hit.results === h.results && hit.count === h.results.length) return hit;
    const text = historyText(h);
    const tokens = tokensOf(text);
    const rendered: RenderedHistory = {
      results: h.results,
      count: h.results.length,
      text,
      tokens,
      item: { id: historyId(h), section: 'history', tokens, elidable: h.results.map(tokensOf) },
    };
    this.cache.set(h, rendered);
    return rendered;
  }

  text(h: HistoryItem): string {
    return this.of(h).text;
  }

  /**
   * Tokens of history items [from, end): sums of the items before the newest
   * are kept per history, since only the newest item grows (a compaction
   * replaces the whole history), so a round adds what is new, not the whole.
   */
  totalTokens(history: readonly HistoryItem[], from = 0): number {
    let sums = this.sums.get(history);
    const settled = Math.max(0, history.length - 1);
    // a history that shrank in place (nothing does that now) is summed again rather than misread
    if (!sums || sums.length - 1 > settled) this.sums.set(history, (sums = [0]));
    for (let i = sums.length - 1; i < settled; i++) sums.push(sums[i] + this.tokens(history[i]));
    const start = Math.min(from, settled);
    const newest = from < history.length && history.length > 0 ? this.tokens(history[settled]) : 0;
    return sums[settled] - sums[start] + newest;
  }

  /** the history as the prompt budget weighs it */
  promptHistory(history: readonly HistoryItem[]): PromptHistory {
    return { length: history.length, at: (i) => this.of(history[i]).item, tokens: this.totalTokens(history) };
  }

  tokens(h: HistoryItem): number {
    return this.of(h).tokens;
  }
}

/**
 * How the session's earlier tasks (the leading session items of the history) give way near the
 * session budget, that is with less than its near share left or less left than the whole prompt
 * would take: summarised when a utility model can (`compact`: how many leading items), else left
 * out (`drop`). Once summarised they stay summarised: the summary is bounded by summary_tokens.
 */
export function sessionGivesWay(
  history: readonly HistoryItem[],
  session: SessionPressure,
  promptTokens: number,
  canCompact: boolean,
): { near: boolean; drop: number; compact: number } {
  let count = 0;
  while (count < history.length && isSessionItem(history[count])) count += 1;
  const overLeft = session.tokens_left !== null && promptTokens > session.tokens_left;
  const near = session.near || overLeft;
  if (!near || count === 0) return { near, drop: 0, compact: 0 };
  const turns = history.slice(0, count).some((h) => sessionTaskOf(h) !== null);
  if (turns && canCompact) return { near, drop: 0, compact: count };
  return { near, drop: turns ? count : 0, compact: 0 };
}

/**
 * system + memory + tools + history + user, each within its budget. History
 * over budget loses its oldest rounds first (the newest always stays, clipped
 * if it must); CONTEXT_BUILT records what was cut.
 */
export class ContextBuilder {
  private readonly rendered = new HistoryRenderings();

  constructor(
    private readonly memory: MemoryRecall,
    private readonly budgets: SectionBudgets = DEFAULT_SECTION_BUDGETS,
    private readonly memoryK = 5,
    /** run discipline: fit the whole prompt into the model's window (trim, compact, or over budget) */
    private readonly prompt: PromptSettings | null = null,
    /** the agents a task may delegate to (offered in the prompt, and as a function under native tool calling) */
    private readonly agents: readonly AgentProfile[] = [],
  ) {}

  async build(
    progress: TaskProgress,
    round: number,
    tools: readonly ToolManifest[],
    signal?: AbortSignal,
    /** toolCalling: the orchestrator speaks native tool calling, so tools go as functions and decided rounds as tool turns */
    /** answerOnly: the round policy's answer_only round: no tools, natively tool_choice none */
    /** session: the task's session budget as it stands (see SessionPressure) */
    opts: {
      canCompact?: boolean;
      toolCalling?: boolean;
      answerOnly?: boolean;
      session?: SessionPressure | null;
    } = {},
  ): Promise<BuiltContext> {
    const cut: string[] = [];
    const sections: EventPayload<'CONTEXT_BUILT'>['sections'] = {};
    const fit = (name: ContextSection, text: string, max = this.budgets[name] * CHARS_PER_TOKEN): string => {
      const out = clip(text, max);
      if (out !== text) cut.push(`${name}:truncated`);
      sections[name] = { tokens: tokensOf(out), trimmed: out === text ? 0 : tokensOf(text) - tokensOf(out) };
      return out;
    };

    let hits = signal?.aborted ? [] : await this.recall(progress);
    // Todos are offered only once they are part of the task, so a run without them is prompted as before.
    const todos = todosInPlay(progress.todos, progress.settings?.todos === 'on');
    const system = fit(
      'system',
      agentPreamble(progress.agent) +
        (this.agents.length ? `${SYSTEM_PROMPT}\n${delegationPrompt(this.agents)}` : SYSTEM_PROMPT) +
        (todos ? `\n${PLAN_TODOS_PROMPT}` : ''),
    );
    const toolsSystem =
      agentPreamble(progress.agent) +
      (this.agents.length
        ? `${TOOLS_SYSTEM_PROMPT}\nCall runledger_delegate to hand a self-contained part of the task to an agent.`
        : TOOLS_SYSTEM_PROMPT);
    const toolText = fit(
      'tools',
      [
        ...tools.map((t) => `- ${t.name}: ${t.description}\n  args: ${JSON.stringify(t.args_schema)}`),
        ...(todos ? [TODO_UPDATE_LINE] : []),
      ].join('\n'),
    );
    const todoText = todos ? todoSection(progress.todos) : '';
    if (todos) sections.todos = { tokens: tokensOf(todoText), trimmed: 0 };

    const rendered = this.rendered;
    const whole = progress.history;
    /** how many of the oldest history items the prompt leaves out (dropped, or summarised) */
    let removed = 0;
    let kept: readonly HistoryItem[] = whole;
    let budgetChars = this.budgets.history * CHARS_PER_TOKEN;
    let compaction: BuiltContext['compaction'];
    let overBudget: string | undefined;
    /** near its session budget: the session's earlier tasks give way before anything of the task's own */
    let sessionNear = false;
    if (this.prompt) {
      // The window decides, not the fixed section budgets: elide, trim, compact, or give up.
      const items: PromptItem[] = [
        { id: 'system', section: 'system', tokens: tokensOf(system) },
        { id: 'tools', section: 'tools', tokens: tokensOf(toolText) },
        {
          id: 'user',
          section: 'user',
          tokens: tokensOf(progress.input),
        },
        ...hits.map((h) => ({
          id: `memory:${h.id}`,
          section: 'memory' as const,
          tokens: tokensOf(memoryLine(h)),
        })),
      ];
      const session = opts.session
        ? sessionGivesWay(
            whole,
            opts.session,
            items.reduce((n, i) => n + i.tokens, 0) + rendered.totalTokens(whole),
            opts.canCompact ?? false,
          )
        : null;
      sessionNear = session?.near ?? false;
      // session items that give way are dropped ahead of the decision, which fits what is left
      const first = session?.drop ?? 0;
      const rest = first > 0 ? whole.slice(first) : whole;
      const decision = decidePrompt(
        items,
        rendered.promptHistory(rest),
        this.prompt,
        opts.canCompact ?? false,
      );
      if (decision.kind === 'exceed') overBudget = decision.detail;
      else budgetChars = decision.sections.history.budget * CHARS_PER_TOKEN;
      const droppedMemory = decision.kind === 'trim' || decision.kind === 'compact' ? decision.drop : [];
      removed = first + (decision.kind === 'trim' || decision.kind === 'compact' ? decision.removeOldest : 0);
      kept = whole.slice(removed);
      // One token of each output's share goes to its line's indent and to rounding, so the
      // elided history stays within the budget and is never clipped at its end.
      const elideTo = decision.kind === 'exceed' ? null : decision.elideTo;
      const maxChars = Math.max(0, (elideTo ?? 0) - 1) * CHARS_PER_TOKEN;
      if (elideTo !== null) {
        const shown = kept.map((h) => elideItem(h, maxChars));
        cut.push(...shown.filter((h, i) => h !== kept[i]).map((h) => `${historyId(h)}:elided`));
        kept = shown;
      }
      const drop = new Set(droppedMemory);
      hits = hits.filter((h) => !drop.has(`memory:${h.id}`));
      cut.push(...droppedMemory);
      if (session?.compact) {
        // the session's earlier tasks are summarised first; the next build fits the rest
        const old = whole.slice(0, session.compact);
        compaction = {
          rounds: old.map((h) => h.round),
          text: old.map((h) => rendered.text(h)).join('\n'),
          summaryTokens: this.prompt.summaryTokens,
          reason: 'session_budget',
        };
      } else if (decision.kind === 'compact') {
        // the summariser reads the old rounds as the budget weighed them: their outputs elided too
        const old = whole.slice(0, removed).map((h) => (elideTo === null ? h : elideItem(h, maxChars)));
        compaction = {
          rounds: old.map((h) => h.round),
          text: old.map((h) => rendered.text(h)).join('\n'),
          summaryTokens: decision.summaryTokens,
        };
      } else cut.push(...removedCut(whole, removed));
    }
    const memory = fit('memory', hits.map(memoryLine).join('\n'));

    if (!this.prompt) {
      // Oldest rounds go first, the newest always stays: kept are the newest items whose lines fit.
      let keptChars = -1;
      removed = whole.length;
      while (removed > 0) {
        const chars = rendered.text(whole[removed - 1]).length + 1;
        if (removed < whole.length && keptChars + chars > budgetChars) break;
        keptChars += chars;
        removed -= 1;
      }
      kept = whole.slice(removed);
      cut.push(...removedCut(whole, removed));
    }
    // what the prompt lost of the removed items: their whole tokens, before any elision
    let trimmedTokens = rendered.totalTokens(whole) - rendered.totalTokens(whole, removed);
    /** earlier tasks of the session trimmed away (not summarised): the prompt says so; they lead the history */
    let sessionLeftOut = 0;
    if (!compaction)
      while (sessionLeftOut < removed && isSessionItem(whole[sessionLeftOut])) sessionLeftOut += 1;
    // Rounds decided by native tool calls go back as tool turns, the rest as text.
    const asTurn = (h: HistoryItem): boolean => Boolean(opts.toolCalling && h.tool_calls?.length);
    const historyFull = kept
      .filter((h) => !asTurn(h))
      .map((h) => rendered.text(h))
      .join('\n');
    const clipped = clip(historyFull, budgetChars);
    if (clipped !== historyFull) {
      cut.push('history:truncated');
      trimmedTokens += tokensOf(historyFull) - tokensOf(clipped);
    }
    const history = [sessionLeftOut > 0 && sessionOmittedNote(sessionLeftOut), clipped]
      .filter(Boolean)
      .join('\n');
    // Rounds sent as tool turns count in the history section as their text would.
    const turnTokens = kept.filter(asTurn).reduce((n, h) => n + rendered.tokens(h), 0);
    sections.history = { tokens: tokensOf(history) + turnTokens, trimmed: trimmedTokens };
    // With run discipline the window decides: the task's input is never cut (too large, the task stops).
    const user = fit('user', progress.input, this.prompt ? Infinity : undefined);

    const body = [
      memory && `## Memory\n${memory}`,
      history && `## History\n${history}`,
      todoText && `## Todos\n${todoText}`,
      opts.answerOnly && `## Round\n${ANSWER_ONLY_NOTE}`,
      `## Task\n${user}`,
    ].filter(Boolean);
    const messages: ChatMessage[] = opts.toolCalling
      ? [
          { role: 'system', content: toolsSystem },
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
      functions: opts.toolCalling
        ? [...toolFunctions(tools, { todos }), ...delegateFunction(this.agents), ...timeFunctions()]
        : [],
      // sys_util reads the results whole (its answer is the last output), never the elided prompt text;
      // the session's earlier tasks are not results of this one
      view: {
        input: progress.input,
        history: whole.slice(removed).filter((h) => !isSessionItem(h)),
      },
      event: {
        round,
        sections,
        total_tokens: total,
        budget_tokens: this.prompt
          ? promptBudgetTokens(this.prompt)
          : Object.values(this.budgets).reduce((n, b) => n + b, 0),
        cut,
        memory_hits: hits.map((h) => ({ id: h.id, score: h.score, text: h.text })),
        compacted: kept.some(isCompactionSummary),
        ...(opts.session
          ? {
              session_budget: {
                used_tokens: opts.session.used_tokens,
                used_cost_usd: opts.session.used_cost_usd,
                near: sessionNear,
              },
            }
          : {}),
      },
      compaction,
      overBudget,
      ...(opts.answerOnly ? { toolChoice: 'none' as const } : {}),
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
