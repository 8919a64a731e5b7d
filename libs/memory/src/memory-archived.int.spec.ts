import { join } from 'node:path';
import { NewEvent, emptyUsage } from '@runledger/contracts';
import { Storage, parseRetention } from '@runledger/state-store';
import { ArchivingStorage, describeArchivingStorages } from '@runledger/testing';
import { Kysely } from 'kysely';
import { HashingEmbedder } from './embedder';
import { MemoryService } from './memory-service';
import { MemoryDatabase, MemoryStore } from './memory-store';

const embedder = new HashingEmbedder();
const at = (day: number, second = 0) =>
  new Date(Date.parse('2026-03-01T00:00:00Z') + day * 86_400_000 + second * 1000).toISOString();

const written = (
  op: 'insert' | 'reinforce' | 'delete',
  entry_id: string,
  text: string,
  weight: number,
  day: number,
) =>
  ({
    type: 'MEMORY_WRITTEN',
    created_at: at(day, 1),
    payload: {
      op,
      entry_id,
      kind: 'fact',
      text,
      weight,
      source: 'system',
      source_event_id: null,
      reason: 'test',
      embedding_model: embedder.model,
      embedding_dim: embedder.dim,
    },
  }) as unknown as NewEvent;

const FACTS = [
  'swc compiles typescript fast',
  'jest runs the unit tests',
  'sqlite stores the event log',
  'hnsw finds nearest vectors',
  'nestjs serves the http api',
  'bubblewrap sandboxes tools',
  'kysely builds sql queries',
  'zod validates the payloads',
];

/** A finished task of `day` that wrote `writes`. */
async function task(storage: Storage, id: string, day: number, writes: NewEvent[]): Promise<void> {
  await storage.eventStore.append(
    id,
    [
      {
        type: 'TASK_RECEIVED',
        payload: { input: `task ${id}`, session_id: `ses_${id}` },
        created_at: at(day),
      },
      ...writes,
      {
        type: 'TASK_COMPLETED',
        payload: { stop_reason: 'completed', detail: 'done', result: 'ok', usage: emptyUsage() },
        created_at: at(day, 2),
      },
    ] as NewEvent[],
    { expected: 'no_stream' },
  );
}

describeArchivingStorages('memory rebuilt from a log with archived tasks', (open) => {
  let sut: ArchivingStorage;
  beforeEach(async () => {
    sut = await open();
  });
  afterEach(() => sut.dispose());

  it('a rebuild after archiving finds what archived tasks wrote: same entries, weights and hits', async () => {
    const { storage } = sut;
    // month-old tasks wrote most facts; a recent task reinforces one of theirs and deletes another
    for (const [i, text] of FACTS.entries())
      await task(storage, `old_${i}`, i, [written('insert', `mem_${i}`, text, 0.4 + i / 20, i)]);
    await task(storage, 'recent', 40, [
      written('reinforce', 'mem_1', FACTS[1], 0.95, 40),
      written('delete', 'mem_3', FACTS[3], 0, 40),
      written('insert', 'mem_new', 'pino writes the logs', 0.7, 40),
    ]);
    const memory = await MemoryService.open({
      store: new MemoryStore(storage.db as unknown as Kysely<MemoryDatabase>),
      events: storage.eventStore,
      embedder,
      indexPath: sut.storage.driver === 'sqlite' ? join(sut.dir, 'memory.hnsw') : null,
      exactScanBelow: 0,
    });
    try {
      const reads = async () => ({
        entries: (await memory.list({}, 100)).map((e) => `${e.id}:${e.weight}:${e.task_id}:${e.text}`).sort(),
        hits: await Promise.all(
          ['which tool runs the unit tests', 'where is the event log', 'nearest vectors', 'logs'].map(
            async (q) => (await memory.search(q, { k: 3 })).map((h) => [h.entry.id, h.entry.weight]),
          ),
        ),
      });
      expect(await memory.rebuildFromLog()).toBe(11);
      const before = await reads();
      expect(before.entries).toHaveLength(8);
      expect(before.entries).toContain('mem_1:0.95:old_1:jest runs the unit tests');

      const run = await sut.archive((a) => a.run(parseRetention('7d')!, Date.parse(at(44))));
      expect(run.tasks.sort()).toEqual(FACTS.map((_, i) => `old_${i}`));
      expect(await storage.eventStore.readAll({ types: ['MEMORY_WRITTEN'] })).toHaveLength(3);

      expect(await memory.rebuildFromLog()).toBe(11);
      expect(await reads()).toEqual(before);
    } finally {
      await memory.close();
    }
  });
});
