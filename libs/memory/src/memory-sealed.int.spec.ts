import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  EventStore,
  PgEventStore,
  SqliteDataKeys,
  SqliteEventStore,
  dataKeysPath,
  eraseSessionKeys,
  openPostgres,
  openSqlite,
} from '@runledger/event-store';
import { migrateToLatest } from '@runledger/migrations';
import { describePostgres, useTestPostgres } from '@runledger/testing';
import { Kysely } from 'kysely';
import { HashingEmbedder } from './embedder';
import { MemoryService } from './memory-service';
import { MemoryDatabase, MemoryStore, vectorToBuffer } from './memory-store';

const SECRET = 'Ada Lovelace keeps her spare key under the blue flowerpot';
const NOTE = 'Lovelace family notes';
const OTHER = 'Bob prefers tabs over spaces in every file';

interface Harness {
  events: EventStore;
  memory: MemoryService;
  embedder: HashingEmbedder;
  /** the memory_entries table as stored, each row as text (text and metadata columns and the vector's bytes) */
  storedRows(): Promise<{ text: string; vectors: Buffer[] }>;
  /** every file the memory keeps on disk (database, WAL, index), null where there are none */
  files(): Buffer | null;
  erase(session: string): Promise<void>;
  close(): Promise<void>;
}

const fact = (text: string, session: string) => ({
  text,
  kind: 'fact' as const,
  source: 'user' as const,
  weight: 0.8,
  reason: 'test',
  session_id: session,
  metadata: { note: NOTE },
});

function sealedMemorySuite(open: () => Promise<Harness>) {
  let h: Harness;
  afterEach(async () => h?.close());

  it('keeps text, metadata and vector sealed at rest and serves them in clear', async () => {
    h = await open();
    await h.memory.insert(fact(SECRET, 'ses_ada'));
    await h.memory.insert(fact(OTHER, 'ses_bob'));
    const vector = vectorToBuffer(h.embedder.embedOne(SECRET));
    const stored = await h.storedRows();
    expect(stored.text).not.toContain('Lovelace');
    expect(stored.vectors.some((v) => v.equals(vector))).toBe(false);
    expect(h.files()?.toString('latin1') ?? '').not.toContain('Lovelace');
    const [hit] = await h.memory.search('spare key under the flowerpot', { k: 1 });
    expect(hit.entry).toMatchObject({ text: SECRET, metadata: { note: NOTE, session_id: 'ses_ada' } });
    const listed = await h.memory.list({ session_id: 'ses_ada' }, 10);
    expect(listed.map((e) => e.text)).toEqual([SECRET]);
  });

  it('after erasure nothing of the entry is left in the table or the index file', async () => {
    h = await open();
    await h.memory.insert(fact(SECRET, 'ses_ada'));
    await h.memory.insert(fact(OTHER, 'ses_bob'));
    const vector = vectorToBuffer(h.embedder.embedOne(SECRET));
    h.memory.flush();
    // the index file holds the vectors themselves: the check below can see one
    if (h.files()) expect(h.files()!.includes(vector)).toBe(true);
    await h.erase('ses_ada');
    expect(await h.memory.forgetSession('ses_ada')).toBe(1);
    h.memory.flush();
    if (h.files()) expect(h.files()!.includes(vector)).toBe(false);
    const stored = await h.storedRows();
    expect(stored.text).not.toContain('Lovelace');
    const hits = await h.memory.search('spare key under the flowerpot', { k: 5 });
    expect(hits.map((x) => x.entry.text)).toEqual([OTHER]);
    expect((await h.memory.search('tabs over spaces', { k: 1 }))[0].entry.text).toBe(OTHER);
  });
}

describe('sealed memory entries on SQLite', () => {
  sealedMemorySuite(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'runledger-memory-sealed-'));
    const path = join(dir, 'runledger.db');
    const handle = openSqlite({ path, synchronous: 'NORMAL' });
    await migrateToLatest(handle.db);
    const events = new SqliteEventStore(handle, { sealPayloads: true });
    const embedder = new HashingEmbedder();
    const db = handle.db as unknown as Kysely<MemoryDatabase>;
    const memory = await MemoryService.open({
      store: new MemoryStore(db, db, events),
      events,
      embedder,
      indexPath: join(dir, 'memory.hnsw'),
      exactScanBelow: 0,
    });
    return {
      events,
      memory,
      embedder,
      async storedRows() {
        const rows = handle.raw.prepare('SELECT text, metadata, vector FROM memory_entries').all() as {
          text: string;
          metadata: string;
          vector: Buffer;
        }[];
        return {
          text: rows.map((r) => `${r.text} ${r.metadata} ${r.vector.toString('latin1')}`).join('\n'),
          vectors: rows.map((r) => r.vector),
        };
      },
      files: () =>
        Buffer.concat(
          readdirSync(dir)
            .filter((f) => !f.includes('.keys'))
            .map((f) => readFileSync(join(dir, f))),
        ),
      async erase(session) {
        const keys = new SqliteDataKeys(dataKeysPath(path));
        keys.eraseSession(session, new Date().toISOString());
        keys.close();
      },
      async close() {
        await memory.close();
        await events.close();
        await handle.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  });
});

describePostgres('sealed memory entries on PostgreSQL', () => {
  const pg = useTestPostgres();
  sealedMemorySuite(async () => {
    const schema = await pg.freshSchema();
    const handle = openPostgres({ url: schema.url, schema: schema.schema, maxConnections: 3 });
    const events = new PgEventStore(handle, { sealPayloads: true });
    const embedder = new HashingEmbedder();
    const db = handle.db as unknown as Kysely<MemoryDatabase>;
    const memory = await MemoryService.open({
      store: new MemoryStore(db, db, events),
      events,
      embedder,
      indexPath: null,
      exactScanBelow: 0,
    });
    return {
      events,
      memory,
      embedder,
      async storedRows() {
        const { rows } = await handle.pool.query<{ row: string; vector: Buffer }>(
          'SELECT m::text AS row, vector FROM memory_entries m',
        );
        return { text: rows.map((r) => r.row).join('\n'), vectors: rows.map((r) => r.vector) };
      },
      files: () => null,
      async erase(session) {
        await eraseSessionKeys(handle.pool, session, new Date().toISOString());
      },
      async close() {
        await memory.close();
        await events.close();
        await handle.close();
        await schema.dispose();
      },
    };
  });
});
