import { RuntimeEvent } from '@runledger/contracts';
import { NoMemoryRecall } from '../ports';
import { runMemoryRecallConformance } from '../testing/memory-recall-conformance';
import { ReplayMemoryRecall } from './recorded-parts';

runMemoryRecallConformance('none', async () => ({ sut: new NoMemoryRecall() }), { recalls: false });

/** A recording whose rounds each showed the first `k` of `given`, as a recall of `k` over them did. */
const recording = (given: readonly string[], k: number): RuntimeEvent[] =>
  [1, 2, 3].map(
    (round) =>
      ({
        type: 'CONTEXT_BUILT',
        payload: {
          round,
          memory_hits: given
            .slice(0, k)
            .map((text, i) => ({ id: `mem_${i + 1}`, score: 0.9 - i / 10, text })),
        },
      }) as unknown as RuntimeEvent,
  );

runMemoryRecallConformance("a recording's replay", async (given, k) => ({
  sut: new ReplayMemoryRecall(recording(given, k)),
}));
