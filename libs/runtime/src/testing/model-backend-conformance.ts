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
}

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
 * failure taxonomy's kind, never another error.
 */
export function runModelBackendConformance(
  name: string,
  make: (replies: PrimedReply[]) => Promise<ModelBackendUnderTest>,
  options: ModelBackendConformanceOptions,
): void {
  const role = options.role ?? 'orchestrator';
  const request = (over: Partial<ModelRequest> = {}): ModelRequest => ({
    role,
    messages: [
      { role: 'system', content: 'You are a test.' },
      { role: 'user', content: 'Say something.' },
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
      const sut = await primed([{ content: 'hello' }]);
      expect(sut.backend).toMatch(/\S/);
      expect(sut.modelFor(role)).toMatch(/\S/);
      expect(sut.label).toMatch(/\S/);
      expect(sut.speaksToolCalls(role)).toBe(options.toolCalls);
    });

    it('answers with the content, usage that adds up, and the model', async () => {
      const sut = await primed([{ content: 'the answer is 42' }]);
      const res = await sut.complete(request());
      expect(res.content).toBe('the answer is 42');
      expect(res.model).toMatch(/\S/);
      for (const n of [res.usage.prompt_tokens, res.usage.completion_tokens, res.usage.total_tokens])
        expect(Number.isInteger(n) && n >= 0).toBe(true);
      expect(res.usage.total_tokens).toBe(res.usage.prompt_tokens + res.usage.completion_tokens);
      if (options.toolCalls) expect(res.tool_calls).toEqual([]);
      else expect(res.tool_calls).toBeUndefined();
    });

    it('answers successive calls in order', async () => {
      const sut = await primed([{ content: 'first' }, { content: 'second' }]);
      expect((await sut.complete(request())).content).toBe('first');
      expect((await sut.complete(request())).content).toBe('second');
    });

    it('streamed, hands out chunks that make up the content', async () => {
      const sut = await primed([{ content: 'streamed in pieces', chunks: ['stream', 'ed in ', 'pieces'] }]);
      const chunks: string[] = [];
      const res = await sut.complete(request({ stream: true, onChunk: (d) => chunks.push(d) }));
      expect(res.content).toBe('streamed in pieces');
      expect(chunks.length).toBeGreaterThan(0);
      expect(chunks.join('')).toBe(res.content);
    });

    if (options.toolCalls)
      it('returns native tool calls with their ids, names and arguments', async () => {
        const calls = [
          { id: 'call_a', name: 'file_read', arguments: '{"path":"a.txt"}' },
          { id: 'call_b', name: 'file_read', arguments: '{"path":"b.txt"}' },
        ];
        const sut = await primed([{ tool_calls: calls }]);
        const res = await sut.complete(request());
        expect(res.tool_calls).toEqual(calls);
      });

    it.each(['rate_limited', 'provider_error', 'authentication_error'] as const)(
      'fails with a ModelCallError of kind %s',
      async (kind) => {
        const sut = await primed([{ error: kind }, { error: kind }, { error: kind }]);
        const err = await sut.complete(request()).then(
          () => null,
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(ModelCallError);
        expect((err as ModelCallError).kind).toBe(kind);
      },
    );
  });
}
