import { InMemoryEventStore } from '@runledger/event-store';
import { OpenAiBackend } from '@runledger/runtime';
import {
  AllowAllPolicy,
  FakeReply,
  InMemoryToolRegistry,
  RecordedRequest,
  manifestOf,
  startFakeOpenAiServer,
  startTestRuntime,
} from '@runledger/testing';
import { WireMessage, messagesOf, serverDiscipline, taskOf } from './workload-support';

type Call = { id?: string; name: string; arguments: string };
const echo = (id: string, text: string): Call => ({ id, name: 'echo', arguments: JSON.stringify({ text }) });

/** Per task (its input): the misbehaving replies, in order; after them the model answers in text. */
const MISBEHAVIOUR: Record<string, FakeReply[]> = {
  'arguments that are not JSON': [{ tool_calls: [{ id: 'c1', name: 'echo', arguments: '{"text": "hi"' }] }],
  'a tool that does not exist': [{ tool_calls: [{ id: 'c1', name: 'rm_everything', arguments: '{}' }] }],
  'two calls with one id': [{ tool_calls: [echo('dup', 'a'), echo('dup', 'b')] }],
  'a call with an empty id': [{ tool_calls: [echo('', 'a')] }],
  'arguments the schema refuses': [{ tool_calls: [{ id: 'c1', name: 'echo', arguments: '{"nope": 1}' }] }],
  'twelve calls at once, one broken': [
    {
      tool_calls: [
        ...Array.from({ length: 11 }, (_, i) => echo(`p${i}`, `part ${i}`)),
        { id: 'p11', name: 'echo', arguments: '[1, 2' },
      ],
    },
  ],
  'text and tool calls in one reply': [{ content: 'let me check', tool_calls: [echo('c1', 'checking')] }],
  'a call with no name': [{ tool_calls: [{ id: 'c1', name: '', arguments: '{}' }] }],
  'a broken call, then the same id again': [
    { tool_calls: [{ id: 'again', name: 'echo', arguments: '{' }] },
    { tool_calls: [echo('again', 'second try')] },
  ],
  'a good call, then a reply cut off mid-call': [
    { tool_calls: [echo('ok1', 'fine')] },
    { tool_calls: [{ id: 'cut', name: 'echo', arguments: '{"text": "tru' }], finish_reason: 'length' },
  ],
};

/**
 * The tool-turn rules an OpenAI-compatible server holds a request to, checked on what the server
 * received (not by the runtime's own checker): an assistant turn's calls are non-empty, with unique
 * non-empty ids, a name and JSON arguments, and are answered at once by one tool message each, in
 * order; no tool message stands anywhere else. Returns the malformed turns of one request.
 */
export function malformedTurns(messages: readonly WireMessage[]): string[] {
  const problems: string[] = [];
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    if (m.role === 'tool') {
      problems.push(`message ${i}: tool message ${m.tool_call_id} answers no call`);
      continue;
    }
    if (m.role !== 'assistant' || m.tool_calls === undefined) continue;
    const calls = m.tool_calls;
    const ids = calls.map((c) => c.id);
    const jsonArgs = (a: unknown) => {
      try {
        JSON.parse(String(a));
        return typeof a === 'string';
      } catch {
        return false;
      }
    };
    const bad =
      calls.length === 0 ||
      ids.some((id) => typeof id !== 'string' || id === '') ||
      new Set(ids).size !== ids.length ||
      calls.some((c) => !c.function?.name || !jsonArgs(c.function.arguments)) ||
      calls.some((c, k) => messages[i + 1 + k]?.role !== 'tool' || messages[i + 1 + k].tool_call_id !== c.id);
    if (bad) problems.push(`message ${i}: assistant turn of ${calls.length} call(s) is malformed`);
    i += calls.filter((_, k) => messages[i + 1 + k]?.role === 'tool').length;
  }
  return problems;
}

export interface MalformedTurns {
  tasks: number;
  requests: number;
  /** assistant tool turns the server received in the tasks' histories */
  turns_sent: number;
  /** of those, and stray tool messages, the malformed ones the server received */
  malformed_received: number;
  /** malformed turns the runtime's MODEL_CALLED events say it sent */
  malformed_recorded: number;
  first_problem: string | null;
}

/**
 * Ten tasks against a model server (real HTTP, native tool calls) that answers with broken tool
 * calls: arguments that are not JSON or that the schema refuses, unknown and nameless tools,
 * duplicate and empty ids, twelve calls with one broken, text mixed with calls, an id reused after a
 * broken call, a reply cut off mid-call. Whatever the model sends, the next request's history must be
 * well-formed: counted on what the server received, and on what MODEL_CALLED recorded.
 */
export async function measureMalformedTurns(): Promise<MalformedTurns> {
  const server = await startFakeOpenAiServer({ apiKey: 'gates' });
  server.setRoute((body) => {
    const script = MISBEHAVIOUR[taskOf(body)];
    if (!script) return undefined;
    const assistantTurns = messagesOf(body).filter((m) => m.role === 'assistant').length;
    return script[assistantTurns] ?? { content: 'done' };
  });
  const store = new InMemoryEventStore();
  const tools = new InMemoryToolRegistry().add(
    manifestOf('echo', {
      description: 'Says its text back.',
      args_schema: {
        type: 'object',
        properties: { text: { type: 'string' } },
        required: ['text'],
        additionalProperties: false,
      },
    }),
    async (args) => args.text,
  );
  const rt = await startTestRuntime({
    store,
    tools,
    permissions: new AllowAllPolicy(),
    model: new OpenAiBackend({
      baseURL: server.baseURL,
      apiKey: 'gates',
      models: { orchestrator: 'gates-model' },
    }),
    discipline: serverDiscipline(),
    concurrency: 4,
  });
  let requests: RecordedRequest[];
  let malformed_recorded = 0;
  try {
    const ids = await Promise.all(
      Object.keys(MISBEHAVIOUR).map(async (input) => {
        const { task_id } = await rt.runtime.submit({ input }, { source: 'api' });
        await rt.runtime.settled(task_id);
        return task_id;
      }),
    );
    for (const id of ids)
      for (const e of await store.readWholeStream(id))
        if (e.type === 'MODEL_CALLED') malformed_recorded += e.payload.tool_turns?.malformed ?? 0;
    requests = server.requests.filter((r) => r.path.endsWith('/chat/completions'));
  } finally {
    await rt.close();
    await server.close();
  }
  const histories = requests.map((r) => messagesOf(r.body));
  const problems = histories.flatMap(malformedTurns);
  for (const h of histories)
    if (malformedTurns(h).length)
      console.log(
        JSON.stringify(
          h.filter((m) => m.role !== 'system').map((m) => ({ ...m, content: m.content?.slice(0, 60) })),
        ),
      );
  return {
    tasks: Object.keys(MISBEHAVIOUR).length,
    requests: requests.length,
    turns_sent: histories.reduce(
      (n, h) => n + h.filter((m) => m.role === 'assistant' && m.tool_calls).length,
      0,
    ),
    malformed_received: problems.length,
    malformed_recorded,
    first_problem: problems[0] ?? null,
  };
}
