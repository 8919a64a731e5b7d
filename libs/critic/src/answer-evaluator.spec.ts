import { CriticModel } from './model-critic';
import { ModelAnswerEvaluator, evaluatorPrompt } from './answer-evaluator';

const model = (reply: string | Error, seen: string[][] = []): CriticModel => ({
  model: 'judge',
  backend: 'scripted',
  complete: async (messages, { signal }) => {
    seen.push(messages.map((m) => m.content));
    signal.throwIfAborted();
    if (reply instanceof Error) throw reply;
    return {
      content: reply,
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, estimated: false },
    };
  },
});
const input = { task: 'which tools does the build use?', answer: 'swc and jest', criteria: 'cite the file' };

describe('ModelAnswerEvaluator', () => {
  it('shows the task, the answer and the criteria, and reads a fenced score', async () => {
    const seen: string[][] = [];
    const sut = new ModelAnswerEvaluator(
      model('```json\n{"score":0.8,"feedback":"cite notes.txt"}\n```', seen),
      1000,
    );
    const verdict = await sut.evaluate(input);
    expect(verdict).toMatchObject({ score: { score: 0.8, feedback: 'cite notes.txt' }, error: null });
    expect(verdict.exchange).toMatchObject({ model: 'judge', usage: { total_tokens: 15 }, error: null });
    expect(seen[0][0]).toMatch(/answer evaluator[\s\S]*cite the file/);
    expect(seen[0][1]).toBe('task:\nwhich tools does the build use?\n\nanswer:\nswc and jest');
  });

  it.each([
    ['prose', 'fine by me', /not JSON/],
    ['a score out of range', '{"score":1.5,"feedback":""}', /not an AnswerScore: score/],
  ])('a reply that is %s is a verdict with an error and no score', async (_, reply, error) => {
    const verdict = await new ModelAnswerEvaluator(model(reply), 1000).evaluate(input);
    expect(verdict.score).toBeNull();
    expect(verdict.error).toMatch(error);
  });

  it('a failed call is a verdict with the error, its exchange recorded with the kind', async () => {
    const verdict = await new ModelAnswerEvaluator(
      model(Object.assign(new Error('slow down'), { kind: 'rate_limited' })),
      1000,
    ).evaluate(input);
    expect(verdict).toMatchObject({ score: null, error: 'evaluator failed: slow down' });
    expect(verdict.exchange.error).toEqual({ kind: 'rate_limited', message: 'slow down' });
  });

  it('with no criteria the prompt asks for the task alone', () => {
    expect(evaluatorPrompt({ ...input, criteria: '' })[0].content).not.toMatch(/criteria/);
  });
});
