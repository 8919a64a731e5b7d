import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { sql } from 'kysely';
import { openSqlite, withStatementCache } from './open-sqlite';

describe('withStatementCache (kysely side of the connection)', () => {
  let dir: string;
  let raw: BetterSqlite3.Database;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'rl-stmt-cache-'));
    raw = new BetterSqlite3(join(dir, 'test.db'));
    raw.exec('CREATE TABLE t (n INTEGER)');
    raw.exec('INSERT INTO t VALUES (1), (2), (3)');
  });
  afterEach(() => {
    if (raw.open) raw.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('prepares a SQL text once and hands the same statement out again', () => {
    const prepare = jest.spyOn(raw, 'prepare');
    const sut = withStatementCache(raw);
    const first = sut.prepare('SELECT n FROM t WHERE n > ?');
    const again = sut.prepare('SELECT n FROM t WHERE n > ?');
    expect(again).toBe(first);
    expect(again.all([1])).toEqual([{ n: 2 }, { n: 3 }]);
    expect(prepare).toHaveBeenCalledTimes(1);
  });

  it('a statement still iterating is not shared: the second query gets a fresh one', () => {
    const sut = withStatementCache(raw);
    const streaming = sut.prepare('SELECT n FROM t ORDER BY n');
    const rows = streaming.iterate([]);
    expect(rows.next().value).toEqual({ n: 1 });
    const other = sut.prepare('SELECT n FROM t ORDER BY n');
    expect(other).not.toBe(streaming);
    expect(other.all([])).toHaveLength(3);
    expect([...rows]).toEqual([{ n: 2 }, { n: 3 }]);
    // done iterating, the cached one is handed out again
    expect(sut.prepare('SELECT n FROM t ORDER BY n')).toBe(streaming);
  });

  it('keeps at most `size` statements, dropping the least recently used', () => {
    const prepare = jest.spyOn(raw, 'prepare');
    const sut = withStatementCache(raw, 2);
    sut.prepare('SELECT 1');
    sut.prepare('SELECT 2');
    sut.prepare('SELECT 1'); // now the most recent
    sut.prepare('SELECT 3'); // drops SELECT 2
    sut.prepare('SELECT 1');
    sut.prepare('SELECT 2');
    expect(prepare.mock.calls.map(([text]) => text)).toEqual([
      'SELECT 1',
      'SELECT 2',
      'SELECT 3',
      'SELECT 2',
    ]);
  });

  it('kysely queries on an opened handle run through it and see later schema changes', async () => {
    raw.close();
    const handle = openSqlite({ path: join(dir, 'kysely.db'), synchronous: 'NORMAL' });
    try {
      await sql`CREATE TABLE u (a INTEGER)`.execute(handle.db);
      const count = () => sql<{ n: number }>`SELECT count(*) AS n FROM u`.execute(handle.db);
      expect((await count()).rows).toEqual([{ n: 0 }]);
      await sql`ALTER TABLE u ADD COLUMN b TEXT`.execute(handle.db);
      await sql`INSERT INTO u (a, b) VALUES (1, 'x')`.execute(handle.db);
      expect((await count()).rows).toEqual([{ n: 1 }]);
      expect((await sql`SELECT * FROM u`.execute(handle.db)).rows).toEqual([{ a: 1, b: 'x' }]);
    } finally {
      await handle.close();
    }
    expect(handle.raw.open).toBe(false);
  });
});
