import { PgEventStore, PostgresHandle, openPostgres } from '@runledger/event-store';
import { TempPostgres, describePostgres, useTestPostgres } from '@runledger/testing';
import { Kysely } from 'kysely';
import { HashingEmbedder } from '../embedder';
import { MemoryService } from '../memory-service';
import { MemoryDatabase, MemoryStore } from '../memory-store';

/** One server instance's memory: its own pool, event store and in-memory index over the shared database. */
interface Instance {
  handle: PostgresHandle;
  events: PgEventStore;
  memory: MemoryService;
}

describePostgres('MemoryService, two instances on one PostgreSQL database', () => {
  const pg = useTestPostgres();
  let db: TempPostgres;
  let instances: Instance[];

  const open = async (): Promise<Instance> => {
    const handle = openPostgres({ url: db.url, schema: db.schema, maxConnections: 3 });
    const events = new PgEventStore(handle);
    const memory = await MemoryService.open({
      store: new MemoryStore(handle.db as unknown as Kysely<MemoryDatabase>),
      events,
      embedder: new HashingEmbedder(),
      indexPath: null,
      // the index, not the exact scan: what each instance keeps in step is under test
      exactScanBelow: 0,
    });
    const instance = { handle, events, memory };
    instances.push(instance);
    return instance;
  };

  beforeEach(async () => {
    db = await pg.freshSchema();
    instances = [];
  });
  afterEach(async () => {
    for (const i of instances) {
      await i.memory.close();
      await i.events.close();
      await i.handle.close();
    }
    await db.dispose();
  });

  const fact = (text: string) => ({
    text,
    kind: 'fact' as const,
    source: 'user' as const,
    weight: 0.8,
    reason: 'test',
  });
  const top = async (i: Instance, query: string) => (await i.memory.search(query, { k: 1 }))[0]?.entry.text;

  it('a fact stored through A is recalled through B, whose index learns it from the log', async () => {
    const a = await open();
    const b = await open();
    await a.memory.insert(fact('the staging database listens on port 6543'));
    await a.memory.insert(fact('deploys happen on tuesdays after standup'));
    expect(await top(b, 'which port does the staging database listen on')).toBe(
      'the staging database listens on port 6543',
    );
    expect(await top(b, 'when do deploys happen')).toBe('deploys happen on tuesdays after standup');
  });

  it('writes through both instances at once get distinct labels and are recalled by both; a delete through B reaches A', async () => {
    const a = await open();
    const b = await open();
    const texts = Array.from({ length: 12 }, (_, i) => `note ${i}: component ${i} owns queue q${i}`);
    const written = await Promise.all(texts.map((t, i) => (i % 2 ? a : b).memory.insert(fact(t))));
    expect(new Set(written.map((e) => e.label)).size).toBe(texts.length);
    for (const i of [a, b]) expect(await top(i, 'component 7 owns queue q7')).toBe(texts[7]);

    await b.memory.delete(written[7].id, 'obsolete');
    expect(await top(a, 'component 7 owns queue q7')).not.toBe(texts[7]);
  });

  it('an instance that starts later builds its index from the table and follows the log from there', async () => {
    const a = await open();
    await a.memory.insert(fact('the cache is flushed nightly at 03:00'));
    const c = await open();
    await a.memory.insert(fact('backups are kept for thirty days'));
    expect(await top(c, 'when is the cache flushed')).toBe('the cache is flushed nightly at 03:00');
    expect(await top(c, 'how long are backups kept')).toBe('backups are kept for thirty days');
  });
});
