import { Kysely, sql } from 'kysely';
import { TempPostgres, describePostgres, useTestPostgres } from '@runledger/testing';
import { TempSqlite, createTempSqlite } from './testing/sqlite';
import { PreparedQuery } from './prepared-query';
import { Database } from './sqlite/schema';
import { outputChunk, taskReceived } from './testing/events';
import { SqliteEventStore } from './sqlite/sqlite-event-store';
import { PgEventStore } from './postgres/pg-event-store';
import { EventStore } from './event-store';

/** The same queries, prepared once, against each dialect's real database. */
function preparedQueries(
  open: () => Promise<{ db: Kysely<Database>; store: EventStore; dispose(): Promise<void> }>,
) {
  let db: Kysely<Database>;
  let store: EventStore;
  let dispose: () => Promise<void>;
  let builds: string[];
  beforeEach(async () => {
    builds = [];
    ({ db, store, dispose } = await open());
  });
  afterEach(() => dispose());

  const byTask = new PreparedQuery<
    Database,
    { task_id: string; after: number; limit: number },
    { sequence: number }
  >(['task_id', 'after', 'limit'], (q, v, shape) => {
    builds.push(shape);
    return (
      q
        .selectFrom('events')
        .select('sequence')
        .where('task_id', '=', v.task_id)
        .where('sequence', '>', v.after)
        // a value built in, not a stand-in: it stays as compiled
        .where('type', '<>', 'NO_SUCH_TYPE')
        .orderBy('sequence')
        .$if(shape === 'limited', (b) => b.limit(v.limit))
    );
  });

  const seed = async () => {
    await store.append('a', [taskReceived(), outputChunk(0), outputChunk(1)], { expected: 'no_stream' });
    await store.append('b', [taskReceived()], { expected: 'no_stream' });
  };

  it('binds each call its own values, in every shape, and runs what was compiled once', async () => {
    await seed();
    const rows = async (task_id: string, after: number, limit?: number) =>
      (
        await byTask.execute(db, { task_id, after, limit: limit ?? 0 }, limit === undefined ? '' : 'limited')
      ).rows.map((r) => Number(r.sequence));
    expect(await rows('a', 0)).toEqual([1, 2, 3]);
    expect(await rows('a', 1)).toEqual([2, 3]);
    expect(await rows('b', 0)).toEqual([1]);
    expect(await rows('a', 0, 2)).toEqual([1, 2]);
    expect(await rows('a', 1, 1)).toEqual([2]);
    expect(await rows('nobody', 0)).toEqual([]);
    // a value that would break SQL if it were spliced in is bound as a value
    expect(await rows("a' OR '1'='1", 0)).toEqual([]);
    expect(Number((await byTask.first(db, { task_id: 'a', after: 2, limit: 0 }))?.sequence)).toBe(3);
    // one build per shape for this handle
    expect(builds).toEqual(['', 'limited']);
  });

  it('refuses a build that leaves a stand-in out of the parameters', () => {
    const spliced = new PreparedQuery<Database, { task_id: string }, never>(['task_id'], (q, v) =>
      q
        .selectFrom('events')
        .select('sequence')
        .where(sql.raw<boolean>(`task_id = '${String(v.task_id)}'`)),
    );
    expect(() => spliced.execute(db, { task_id: 'a' })).toThrow(/not bound as a parameter/);
  });
}

describe('PreparedQuery on SQLite', () => {
  preparedQueries(async () => {
    const temp: TempSqlite = await createTempSqlite();
    const store = new SqliteEventStore(temp.handle);
    return { db: temp.handle.db, store, dispose: async () => temp.dispose() };
  });
});

describePostgres('PreparedQuery on PostgreSQL', () => {
  const pg = useTestPostgres();
  preparedQueries(async () => {
    const temp: TempPostgres = await pg.freshSchema();
    const store = new PgEventStore(temp.handle);
    return {
      db: temp.handle.db,
      store,
      dispose: async () => {
        await store.close();
        await temp.dispose();
      },
    };
  });
});
