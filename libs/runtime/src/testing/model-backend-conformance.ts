import { ModelToolCall, Role } from '@runledger/contracts';
import { ModelBackend, ModelCallError, ModelRequest, ToolFunction } from '../model/model-backend';

/** A reply an adapter under test is primed with. */
export type PrimedReply =
  | { content: string; chunks?: string[] }
  | { tool_calls: ModelToolCall[] }
  | { error: 'rate_limited' | 'provider_error' | 'authentication_error' };

export interface ModelBackendUnderTest {
  sut: ModelBackend;
  close?: () => Promise<void>;
}

export interface ModelBackendConformanceOptions {
  /** the role the adapter is primed for */
  role?: Role;
  /** whether its answers for `role` are native tool calls (the tools protocol) */
  toolCalls: boolean;
  /**
   * An adapter whose answer follows from its input alone (sys_util) is primed by what it is asked:
   * each reply it can give, with the user message that draws it. The suite primes such an adapter
   * with these replies only, in order, and asks each call with the reply's input. Absent: the
   * adapter is primed through `make` with any content.
   */
  answersFrom?: { input: string; content: string }[];
  /** whether it streams a streamed request (default true); one that does not must still answer whole, handing out no chunk */
  streams?: boolean;
  /** whether it can be primed to fail (default true); an adapter that computes its answer cannot */
  fails?: boolean;
}

/** The replies the suite primes an adapter with, in the order the cases use them. */
const SAMPLE_CONTENTS = ['hello', 'the answer is 42', 'first', 'second', 'streamed in pieces'];

const READ_FILE: ToolFunction = {
  name: 'file_read',
  description: 'Reads a file.',
  parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
};

/**
 * What every ModelBackend promises the runtime, for a backend primed with replies in order: it
 * names itself; it answers with the primed content, usage that adds up and a model name; streamed,
 * the chunks it hands out are the content; native tool calls come back with their ids, names and
 * arguments exactly when it speaks the tools protocol; a failure is a ModelCallError of the
 * failure taxonomy's kind, never another error. An adapter that computes its answer from its input
 * (answersFrom) is primed by what it is asked, and is held to the cases it can be primed for.
 */
export function runModelBackendConformance(
  name: string,
  make: (replies: PrimedReply[]) => Promise<ModelBackendUnderTest>,
  options: ModelBackendConformanceOptions,
): void {
  const role = options.role ?? 'orchestrator';
  const answers = options.answersFrom;
  if (answers && answers.length < SAMPLE_CONTENTS.length)
    throw new Error(`an adapter primed by its input needs ${SAMPLE_CONTENTS.length} replies it can give`);
  /** the i-th reply the cases prime */
  const sample = (i: number): string => (answers ? answers[i].content : SAMPLE_CONTENTS[i]);
  const inputOf = (content: string): string =>
    answers?.find((a) => a.content === content)?.input ?? 'Say something.';
  const request = (content: string, over: Partial<ModelRequest> = {}): ModelRequest => ({
    role,
    messages: [
      { role: 'system', content: 'You are a test.' },
      { role: 'user', content: inputOf(content) },
    ],
    timeout_ms: 10_000,
    ...(options.toolCalls ? { tools: [READ_FILE] } : {}),
    ...over,
  });

  describe(`ModelBackend conformance: ${name}`, () => {
    let under: ModelBackendUnderTest | null = null;
    const primed = async (replies: PrimedReply[]) => (under = await make(replies)).sut;
    afterEach(async () => {
      await under?.close?.();
      under = null;
    });

    it('names its adapter, its model for the role and a label', async () => {
      const sut = await primed([{ content: sample(0) }]);
      expect(sut.backend).toMatch(/\S/);
      expect(sut.modelFor(role)).toMatch(/\S/);
      expect(sut.label).toMatch(/\S/);
      expect(sut.speaksToolCalls(role)).toBe(options.toolCalls);
    });

    it('answers with the content, usage that adds up, and the model', async () => {
      const sut = await primed([{ content: sample(1) }]);
      const res = await sut.complete(request(sample(1)));
      expect(res.content).toBe(sample(1));
      expect(res.model).toMatch(/\S/);
      for (const n of [res.usage.prompt_tokens, res.usage.completion_tokens, res.usage.total_tokens])
        expect(Number.isInteger(n) && n >= 0).toBe(true);
      expect(res.usage.total_tokens).toBe(res.usage.prompt_tokens + res.usage.completion_tokens);
      if (options.toolCalls) expect(res.tool_calls).toEqual([]);
      else expect(res.tool_calls).toBeUndefined();
    });

    it('answers successive calls in order', async () => {
      const sut = await primed([{ content: sample(2) }, { content: sample(3) }]);
      expect((await sut.complete(request(sample(2)))).content).toBe(sample(2));
      expect((await sut.complete(request(sample(3)))).content).toBe(sample(3));
    });

    if (options.streams ?? true)
      it('streamed, hands out chunks that make up the content', async () => {
        const sut = await primed([
          { content: sample(4), ...(answers ? {} : { chunks: ['stream', 'ed in ', 'pieces'] }) },
        ]);
        const chunks: string[] = [];
        const res = await sut.complete(request(sample(4), { stream: true, onChunk: (d) => chunks.push(d) }));
        expect(res.content).toBe(sample(4));
        expect(chunks.length).toBeGreaterThan(0);
        expect(chunks.join('')).toBe(res.content);
      });
    else
      it('asked to stream, answers the whole content and hands out no chunk', async () => {
        const sut = await primed([{ content: sample(4) }]);
        const chunks: string[] = [];
        const res = await sut.complete(request(sample(4), { stream: true, onChunk: (d) => chunks.push(d) }));
        expect(res.content).toBe(sample(4));
        expect(chunks).toEqual([]);
      });

    if (options.toolCalls)
      it('returns native tool calls with their ids, names and arguments', async () => {
        const calls = [
          { id: 'call_a', name: 'file_read', arguments: '{"path":"a.txt"}' },
          { id: 'call_b', name: 'file_read', arguments: '{"path":"b.txt"}' },
        ];
        const sut = await primed([{ tool_calls: calls }]);
        const res = await sut.complete(request(''));
        expect(res.tool_calls).toEqual(calls);
      });

    if (options.fails ?? true)
      it.each(['rate_limited', 'provider_error', 'authentication_error'] as const)(
        'fails with a ModelCallError of kind %s',
        async (kind) => {
          const sut = await primed([{ error: kind }, { error: kind }, { error: kind }]);
          const err = await sut.complete(request('')).then(
            () => null,
            (e: unknown) => e,
          );
          expect(err).toBeInstanceOf(ModelCallError);
          expect((err as ModelCallError).kind).toBe(kind);
        },
      );
  });
}
