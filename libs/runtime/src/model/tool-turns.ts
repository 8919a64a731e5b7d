import { ModelToolCall } from '@runledger/contracts';
import { ChatMessage } from './model-backend';

export type ToolTurnCheck =
  { ok: true; turns: number } | { ok: false; turns: number; malformed: number; error: string };

/**
 * The tool-turn rules every OpenAI-compatible server enforces (and some
 * enforce by failing obscurely): an assistant message with `tool_calls` (at
 * least one, ids unique and non-empty) is followed at once by exactly one
 * `tool` message per call, answering the ids in the order they were called;
 * no `tool` message stands anywhere else. Checked before every request, so a
 * malformed sequence is never sent.
 */
export function checkToolTurns(messages: readonly ChatMessage[]): ToolTurnCheck {
  let turns = 0;
  const errors: string[] = [];
  let i = 0;
  while (i < messages.length) {
    const m = messages[i];
    if (m.role === 'tool') {
      errors.push(`message ${i}: tool message for ${m.tool_call_id} answers no preceding tool call`);
      i += 1;
      continue;
    }
    if (m.role !== 'assistant' || m.tool_calls === undefined) {
      i += 1;
      continue;
    }
    turns += 1;
    const turnErrors = turnProblems(messages, i, m.tool_calls);
    if (turnErrors.length > 0) errors.push(...turnErrors);
    // The answers that do belong to this turn are consumed with it; a stray one is reported above.
    i += 1;
    let answered = 0;
    while (i < messages.length && messages[i].role === 'tool' && answered < m.tool_calls.length) {
      i += 1;
      answered += 1;
    }
  }
  if (errors.length === 0) return { ok: true, turns };
  return { ok: false, turns, malformed: errors.length, error: errors.join('; ') };
}

function turnProblems(
  messages: readonly ChatMessage[],
  at: number,
  calls: readonly ModelToolCall[],
): string[] {
  if (calls.length === 0) return [`message ${at}: assistant tool_calls is empty`];
  const ids = calls.map((c) => c.id);
  if (ids.some((id) => id.trim() === '')) return [`message ${at}: a tool call has an empty id`];
  const duplicate = ids.find((id, k) => ids.indexOf(id) !== k);
  if (duplicate) return [`message ${at}: tool call id ${duplicate} is used twice`];
  for (let k = 0; k < calls.length; k++) {
    const answer = messages[at + 1 + k];
    if (answer?.role !== 'tool')
      return [`message ${at}: tool call ${calls[k].id} has no tool message (expected at ${at + 1 + k})`];
    if (answer.tool_call_id !== calls[k].id)
      return [
        `message ${at + 1 + k}: tool message answers ${answer.tool_call_id}, expected ${calls[k].id} (answers follow the calls in order)`,
      ];
  }
  return [];
}

const isJsonText = (text: string): boolean => {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
};

/**
 * The messages as a server will take them back: a call whose arguments were not JSON (a model's
 * slip, a reply cut off mid-call) goes back as `{"unparsed_arguments": "<what it sent>"}`. The tool
 * message after it already says the arguments were refused; servers that parse the arguments of
 * the history (vLLM's and Ollama's chat templates among them) would refuse the whole request
 * otherwise. The log keeps what the model sent.
 */
export function withJsonArguments(messages: readonly ChatMessage[]): ChatMessage[] {
  return messages.map((m) =>
    m.role === 'assistant' && m.tool_calls?.some((c) => !isJsonText(c.arguments))
      ? {
          ...m,
          tool_calls: m.tool_calls.map((c) =>
            isJsonText(c.arguments)
              ? c
              : { ...c, arguments: JSON.stringify({ unparsed_arguments: c.arguments }) },
          ),
        }
      : m,
  );
}

/**
 * `calls` with an id each of its own, to be sent back as a tool turn: a call whose id an earlier
 * call of the reply already has gets `<id>_<n>` (n its position, 1-based, the first free one). A
 * reply whose calls share an id cannot be answered otherwise, as every server refuses the repeat.
 */
export function distinctCallIds(calls: readonly ModelToolCall[]): ModelToolCall[] {
  const taken = new Set(calls.map((c) => c.id));
  const seen = new Set<string>();
  return calls.map((c, k) => {
    if (!seen.has(c.id)) {
      seen.add(c.id);
      return c;
    }
    let id = `${c.id}_${k + 1}`;
    for (let n = 2; taken.has(id); n++) id = `${c.id}_${k + 1}_${n}`;
    taken.add(id);
    return { ...c, id };
  });
}

/** One streamed piece of a tool call, as chat.completions chunks carry it. */
export interface ToolCallDelta {
  index: number;
  id?: string | null;
  function?: { name?: string | null; arguments?: string | null } | null;
}

/**
 * Streamed tool calls, put back together: pieces are keyed by `index`; the id
 * and name arrive with the first piece, the arguments as fragments to
 * concatenate. Calls come out in index order.
 */
export class ToolCallAssembler {
  private readonly calls = new Map<number, { id: string; name: string; arguments: string }>();

  feed(deltas: readonly ToolCallDelta[] | null | undefined): void {
    for (const d of deltas ?? []) {
      const call = this.calls.get(d.index) ?? { id: '', name: '', arguments: '' };
      if (d.id) call.id = d.id;
      // Most servers send the name once; some repeat it whole in every piece, a few send it in fragments.
      const name = d.function?.name;
      if (name && name !== call.name) call.name += name;
      if (d.function?.arguments) call.arguments += d.function.arguments;
      this.calls.set(d.index, call);
    }
  }

  /** the calls so far; a call the server sent without an id is given one from its index, so it can be answered */
  result(): ModelToolCall[] {
    return [...this.calls.entries()]
      .sort(([a], [b]) => a - b)
      .map(([index, c]) => ({ id: c.id || `call_${index}`, name: c.name, arguments: c.arguments }));
  }
}
