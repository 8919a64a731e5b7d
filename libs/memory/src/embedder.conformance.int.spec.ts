import { startFakeOpenAiServer } from '@runledger/testing';
import { HashingEmbedder, OpenAIEmbedder } from './embedder';
import { runEmbedderConformance } from './testing/embedder-conformance';

runEmbedderConformance('HashingEmbedder', async () => ({ sut: new HashingEmbedder(64) }));

runEmbedderConformance('OpenAIEmbedder against a local OpenAI-compatible server', async () => {
  const server = await startFakeOpenAiServer({ embeddingDim: 32 });
  return {
    sut: new OpenAIEmbedder({ baseURL: server.baseURL, model: 'embed-test', dim: 32, batchSize: 64 }),
    close: () => server.close(),
  };
});
