import { FakeOpenAiServer, fakeEmbedding, startFakeOpenAiServer } from '@runledger/testing';
import { HashingEmbedder, OpenAIEmbedder, cosine } from './embedder';

describe('OpenAIEmbedder against a local OpenAI-compatible server', () => {
  let server: FakeOpenAiServer;
  beforeAll(async () => {
    server = await startFakeOpenAiServer({ apiKey: 'k-test', embeddingDim: 48 });
  });
  afterAll(() => server.close());
  const embedder = (over: Partial<ConstructorParameters<typeof OpenAIEmbedder>[0]> = {}) =>
    new OpenAIEmbedder({ baseURL: server.baseURL, apiKey: 'k-test', model: 'embed-small', dim: 48, ...over });

  it('embeds in batches, keeps the order, normalises, and sends model and key', async () => {
    const sut = embedder({ batchSize: 2 });
    const texts = ['one', 'two', 'three', 'four', 'five'];
    server.requests.length = 0;
    const vectors = await sut.embed(texts);
    const calls = server.requests.filter((r) => r.path === '/v1/embeddings');
    expect(calls.map((r) => r.body.input)).toEqual([['one', 'two'], ['three', 'four'], ['five']]);
    expect(calls.every((r) => r.body.model === 'embed-small' && r.body.encoding_format === 'float')).toBe(
      true,
    );
    vectors.forEach((v, i) => {
      expect(v).toHaveLength(48);
      expect(cosine(v, Float32Array.from(fakeEmbedding(texts[i], 48)))).toBeCloseTo(1, 5);
    });
  });

  it('asks for the configured dimension when told to', async () => {
    const sut = embedder({ model: 'embed-3', dim: 16, requestDimensions: true });
    const [v] = await sut.embed(['x']);
    expect(v).toHaveLength(16);
  });

  it('refuses vectors of another dimension than configured', async () => {
    const sut = embedder({ dim: 384 });
    await expect(sut.embed(['x'])).rejects.toThrow(/returned dim 48, configured 384/);
  });

  it('surfaces an authentication failure', async () => {
    const sut = embedder({ apiKey: 'wrong' });
    await expect(sut.embed(['x'])).rejects.toThrow(/Incorrect API key/);
  });
});

describe('HashingEmbedder', () => {
  const sut = new HashingEmbedder();

  it('is deterministic, unit length, and close for texts that share words', async () => {
    const [a, a2, b, c] = await sut.embed([
      'the deploy script is ops/deploy.sh',
      'the deploy script is ops/deploy.sh',
      'where is the deploy script?',
      'bananas are yellow',
    ]);
    expect(Array.from(a)).toEqual(Array.from(a2));
    expect(cosine(a, a)).toBeCloseTo(1, 5);
    expect(cosine(a, b)).toBeGreaterThan(0.4);
    expect(cosine(a, c)).toBeLessThan(0.2);
    expect(sut.model).toBe('runledger-hash-v1');
    expect(a).toHaveLength(384);
  });

  it('takes the cosine of vectors of any length, whatever is left over after the fours', () => {
    for (const n of [1, 2, 3, 5, 7, 384, 385, 387]) {
      const a = Float32Array.from({ length: n }, (_, i) => Math.sin(i + 1));
      const b = Float32Array.from({ length: n }, (_, i) => Math.cos(3 * i));
      let expected = 0;
      for (let i = 0; i < n; i++) expected += a[i] * b[i];
      expect(cosine(a, b)).toBeCloseTo(expected, 5);
    }
  });

  it('embeds a text without words as one fixed unit vector, never the zero vector', () => {
    const empty = sut.embedOne('');
    expect(cosine(empty, empty)).toBeCloseTo(1, 5);
    expect(Array.from(sut.embedOne('?!'))).toEqual(Array.from(empty));
  });
});
