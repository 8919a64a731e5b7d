import { RuntimeEvent } from '@runledger/contracts';
import { SysUtilBackend } from '../model/sys-util';
import { MemoryHit, MemoryRecall } from '../ports';
import { replayView } from '../replay/replay-view';
import { replayTask } from '../runtime.module';
import { useTempStore } from './temp-store';
import { AllowAllPolicy, testToolRegistry } from './test-tools';
import { RecordingRuntimeLogger, startTestRuntime } from './test-runtime';

export interface MemoryRecallSubject {
  sut: MemoryRecall;
  dispose?: () => Promise<void>;
}

export interface MemoryRecallConformanceOptions {
  /** whether it answers with what it was given (default true); false: it recalls nothing, whatever it holds */
  recalls?: boolean;
}

/** What the adapters are given to recall: distinct texts, each one a query finds. */
export const RECALLABLE = [
  'the deploy key lives in the ops vault under deploy/prod',
  'the billing service is written in Go and deployed with Nomad',
  'backups run nightly at 02:00 UTC to the cold bucket',
];
const K = 5;
const SESSION = 'sess_recall';

/** Hands on what the adapter answers, keeping each answer (what the runtime was shown). */
class Answered extends MemoryRecall {
  readonly answers: MemoryHit[][] = [];
  constructor(private readonly inner: MemoryRecall) {
    super();
  }
  async recall(query: string, options: { session_id: string; k: number }): Promise<MemoryHit[]> {
    const hits = await this.inner.recall(query, options);
    this.answers.push(hits);
    return hits;
  }
}

/**
 * The behaviour every MemoryRecall adapter (what the context builder asks memory for) must show,
 * from a short spec per adapter. `factory(given, k)` makes one that holds the texts `given` (for a
 * recording: rounds recorded by a recall of `k` over them).
 */
export function runMemoryRecallConformance(
  name: string,
  factory: (given: readonly string[], k: number) => Promise<MemoryRecallSubject>,
  options: MemoryRecallConformanceOptions = {},
): void {
  const recalls = options.recalls ?? true;

  describe(`MemoryRecall conformance: ${name}`, () => {
    const temp = useTempStore('rl-recall-conformance-');
    const open: MemoryRecallSubject[] = [];
    const subject = async (given: readonly string[], k = K) => {
      const s = await factory(given, k);
      open.push(s);
      return s.sut;
    };
    afterEach(async () => {
      for (const s of open.splice(0)) await s.dispose?.();
    });

    it('given nothing to recall, it answers no hit (and does not throw)', async () => {
      const sut = await subject([]);
      expect(await sut.recall('where is the deploy key?', { session_id: SESSION, k: K })).toEqual([]);
    });

    it(
      recalls
        ? 'given texts, it answers hits made of them: an id each, no id twice, a finite score, at most k'
        : 'given texts, it still answers no hit',
      async () => {
        for (const k of [1, 2, K]) {
          const sut = await subject(RECALLABLE, k);
          const hits = await sut.recall('the deploy key in the ops vault', { session_id: SESSION, k });
          if (!recalls) {
            expect(hits).toEqual([]);
            continue;
          }
          expect(hits.length).toBeGreaterThan(0);
          expect(hits.length).toBeLessThanOrEqual(k);
          expect(new Set(hits.map((h) => h.id)).size).toBe(hits.length);
          for (const h of hits) {
            expect(h.id).toMatch(/\S/);
            expect(RECALLABLE).toContain(h.text);
            expect(Number.isFinite(h.score)).toBe(true);
          }
        }
      },
    );

    it('given a task run with it, then each round shows what it answered, and the task replays from its log event for event', async () => {
      const answered = new Answered(await subject(RECALLABLE));
      const rt = await startTestRuntime({
        store: temp.store,
        tools: testToolRegistry(temp.dir),
        permissions: new AllowAllPolicy(),
        model: new SysUtilBackend(),
        memory: answered,
      });
      let original: RuntimeEvent[];
      try {
        const { task_id } = await rt.runtime.submit(
          { input: 'run echo recalled', session_id: SESSION },
          { source: 'cli' },
        );
        expect((await rt.runtime.settled(task_id)).final).toMatchObject({ stop_reason: 'completed' });
        original = await temp.store.readWholeStream(task_id);
      } finally {
        await rt.close();
      }
      const shown = original.flatMap((e) => (e.type === 'CONTEXT_BUILT' ? [e.payload.memory_hits] : []));
      expect(shown).toHaveLength(2);
      expect(shown).toEqual(
        answered.answers.map((hits) => hits.map(({ id, score, text }) => ({ id, score, text }))),
      );
      expect(shown.some((hits) => hits.length > 0)).toBe(recalls);

      const { events: replayed } = await replayTask(
        { store: temp.store, tools: testToolRegistry(temp.dir), logger: new RecordingRuntimeLogger() },
        original[0].task_id,
      );
      expect(replayView(replayed)).toEqual(replayView(original));
    });
  });
}
