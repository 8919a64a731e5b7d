import { CriticInput } from './critic';
import { criticEvents } from './critic';
import { heuristicScore } from './heuristic-critic';
import { CriticModel, ModelCritic } from './model-critic';

const input = (over: Partial<CriticInput> = {}): CriticInput => ({
  target_event_id: 'evt_1',
  call_id: 'call_1',
  tool: 'read_file',
  ok: true,
  output: 'the answer is 42',
  error: null,
  metadata: {},
  ...over,
});

const modelReplying = (reply: (signal: AbortSignal) => Promise<string>): CriticModel => ({
  model: 'critic-m',
  backend: 'scripted',
  complete: async (_messages, { signal }) => ({ content: await reply(signal) }),
});

const valid = {
  correctness: 0.9,
  usefulness: 0.8,
  safety: 1,
  memory_store: true,
  weight: 0.7,
  notes: 'good',
};

describe('ModelCritic', () => {
  it('returns the validated score of a JSON reply (fenced JSON tolerated)', async () => {
    const sut = new ModelCritic(modelReplying(async () => '```json\n' + JSON.stringify(valid) + '\n```'));
    const verdict = await sut.evaluate(input());
    expect(verdict).toMatchObject({ critic: 'model', score: valid, error: null });
    expect(verdict.exchange?.content).toContain('"correctness"');
  });

  it.each([
    ['throws', modelReplying(async () => Promise.reject(new Error('boom 500'))), /critic failed: boom 500/],
    ['returns non-JSON', modelReplying(async () => 'I think it went well'), /not JSON/],
    [
      'returns out-of-range numbers',
      modelReplying(async () => JSON.stringify({ ...valid, correctness: 1.5 })),
      /correctness/,
    ],
    [
      'returns a wrong shape',
      modelReplying(async () => JSON.stringify({ ...valid, memory_store: 'yes' })),
      /memory_store/,
    ],
  ])('when the model %s the score is absent and the error recorded', async (_name, model, error) => {
    const sut = new ModelCritic(model);
    const verdict = await sut.evaluate(input());
    expect(verdict.score).toBeNull();
    expect(verdict.error).toMatch(error);
    const events = criticEvents(input(), verdict);
    expect(events.map((e) => e.type)).toEqual(['MODEL_CALLED', 'MODEL_RESPONDED', 'CRITIC_RESULT']);
    expect(events[2].payload).toMatchObject({ score: null, critic: 'model', target_event_id: 'evt_1' });
  });

  it.each([
    [
      'a model error names its kind',
      Object.assign(new Error('slow down'), { kind: 'rate_limited' }),
      'rate_limited',
    ],
    [
      'a recorded timeout fails as a timeout again',
      Object.assign(new Error('t'), { kind: 'timeout' }),
      'timeout',
    ],
    ['a plain throw is a provider error', new Error('socket hang up'), 'provider_error'],
    [
      'an unknown kind is a provider error',
      Object.assign(new Error('x'), { kind: 'weird' }),
      'provider_error',
    ],
  ])('%s on the recorded call', async (_name, err, kind) => {
    const sut = new ModelCritic(modelReplying(async () => Promise.reject(err)));
    const verdict = await sut.evaluate(input());
    expect(verdict.exchange?.error).toEqual({ kind, message: err.message });
    expect(verdict.error).toBe(`critic failed: ${err.message}`);
  });

  it('times out a model that never answers, even one that ignores its signal', async () => {
    const sut = new ModelCritic(
      modelReplying(() => new Promise<string>(() => undefined)),
      30,
    );
    const verdict = await sut.evaluate(input());
    expect(verdict.score).toBeNull();
    expect(verdict.error).toMatch(/timed out after 30 ms/);
    expect(verdict.exchange?.error?.kind).toBe('timeout');
  });
});

describe('heuristicScore', () => {
  it.each([
    ['ok with output', input(), { memory_store: true, usefulness: 0.7 }],
    ['ok with empty output', input({ output: '' }), { memory_store: false, usefulness: 0.1 }],
    ['ok but nonzero exit code', input({ output: { exit_code: 2, stdout: '' } }), { correctness: 0.1 }],
    [
      'failed with an error',
      input({ ok: false, output: null, error: 'ENOENT' }),
      { correctness: 0.1, memory_store: true },
    ],
  ])('%s', (_name, given, expected) => {
    const score = heuristicScore(given);
    expect(score).toMatchObject(expected);
    expect(score.notes).toMatch(/^heuristic critic/);
  });
});
