import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSqlite } from '@runledger/event-store';
import { Kysely, Migrator, NO_MIGRATIONS, sql } from 'kysely';
import { MIGRATIONS, migrateToLatest } from './index';

describe('migrations', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'runledger-mig-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const tables = async (db: Kysely<unknown>) =>
    (
      await sql<{
        name: string;
      }>`SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger') AND name NOT LIKE 'kysely_%' AND name NOT LIKE 'sqlite_%' ORDER BY name`.execute(
        db,
      )
    ).rows.map((r) => r.name);

  it('migrates a new file to the latest schema, once, and back down to nothing', async () => {
    const sut = openSqlite({ path: join(dir, 'a', 'db.sqlite') });
    const first = await migrateToLatest(sut.db);
    expect(first.results?.map((r) => r.migrationName)).toEqual(Object.keys(MIGRATIONS));
    expect(await tables(sut.db as Kysely<unknown>)).toEqual(
      expect.arrayContaining(['checkpoints', 'events', 'events_no_delete', 'events_no_update', 'tasks']),
    );
    expect((await migrateToLatest(sut.db)).results).toEqual([]);

    const migrator = new Migrator({
      db: sut.db,
      provider: { getMigrations: async () => ({ ...MIGRATIONS }) },
    });
    const down = await migrator.migrateTo(NO_MIGRATIONS);
    expect(down.error).toBeUndefined();
    expect(await tables(sut.db as Kysely<unknown>)).toEqual([]);
    await sut.close();
  });

  it('lists migration files named <epoch-ms>-<VerbNoun>, in order', () => {
    const names = Object.keys(MIGRATIONS);
    for (const n of names) expect(n).toMatch(/^\d{13}-[A-Z][A-Za-z]+$/);
    expect([...names].sort()).toEqual(names);
  });
});
