import { Database, LeaseToken, PreparedQuery } from '@runledger/event-store';
import { Expression, Kysely, Selectable, sql } from 'kysely';
import { ClaimOptions, LeaseStore, TaskLease } from './lease-store';
import { StateStoreDatabase, StateStoreTables, TaskLeasesTable } from './schema';

/** SQLite's clock in epoch milliseconds; stable within one statement, so a claim compares and sets with one "now". */
export const SQLITE_NOW_MS = sql<number>`CAST(unixepoch('subsec') * 1000 AS INTEGER)`;
/** PostgreSQL's, likewise stable within one statement; every instance judges expiry by the server's clock */
export const POSTGRES_NOW_MS = sql<number>`(extract(epoch from statement_timestamp()) * 1000)::bigint`;

/** expires_at of a released lease: expired for everyone, and not renewable by its last owner */
const RELEASED = 0;
/** ids per statement: well below SQLite's and PostgreSQL's limits on bound parameters */
const CHUNK = 300;

const chunked = <T>(items: readonly T[]): T[][] =>
  Array.from({ length: Math.ceil(items.length / CHUNK) }, (_, i) => items.slice(i * CHUNK, (i + 1) * CHUNK));

/** bigint columns come back as numbers from better-sqlite3 and as strings from pg */
const toLease = (row: Pick<TaskLeasesTable, 'task_id' | 'owner' | 'epoch' | 'expires_at'>): TaskLease => ({
  task_id: row.task_id,
  owner: row.owner,
  epoch: Number(row.epoch),
  expires_at: Number(row.expires_at),
});

/**
 * LeaseStore over the `task_leases` table with kysely. Every statement is
 * atomic on its own (a claim is one upsert that compares and bumps), so no
 * transaction spans awaits on the shared connection. The queries are plain
 * SQL both SQLite and PostgreSQL run; `nowMs` is the database's clock in
 * epoch milliseconds (SQLITE_NOW_MS, or PostgreSQL's equivalent).
 */
export class SqlLeaseStore extends LeaseStore {
  private readonly db: Kysely<StateStoreDatabase>;

  constructor(
    db: Kysely<Database>,
    private readonly nowMs: Expression<number>,
  ) {
    super();
    this.db = db.withTables<StateStoreTables>();
  }

  /** A claim's upsert, compiled once per form (forced or not): it runs for every task a loop starts. */
  private readonly claimQuery = new PreparedQuery<
    StateStoreDatabase,
    { task_id: string; owner: string; ttl_ms: number },
    Selectable<TaskLeasesTable>
  >(['task_id', 'owner', 'ttl_ms'], (db, v, shape) =>
    db
      .insertInto('task_leases')
      .values({
        task_id: v.task_id,
        owner: v.owner,
        epoch: 1,
        expires_at: sql<number>`${this.nowMs} + ${v.ttl_ms}`,
      })
      .onConflict((oc) => {
        const update = oc.column('task_id').doUpdateSet((eb) => ({
          owner: eb.ref('excluded.owner'),
          epoch: eb(eb.ref('task_leases.epoch'), '+', 1),
          expires_at: eb.ref('excluded.expires_at'),
        }));
        return shape === 'force' ? update : update.where('task_leases.expires_at', '<=', this.nowMs);
      })
      .returningAll(),
  );

  private readonly releaseQuery = new PreparedQuery<
    StateStoreDatabase,
    { task_id: string; owner: string; epoch: number },
    never
  >(['task_id', 'owner', 'epoch'], (db, v) =>
    db
      .updateTable('task_leases')
      .set({ expires_at: RELEASED })
      .where('task_id', '=', v.task_id)
      .where('owner', '=', v.owner)
      .where('epoch', '=', v.epoch),
  );

  async claim(taskId: string, owner: string, options: ClaimOptions): Promise<TaskLease | null> {
    const row = await this.claimQuery.first(
      this.db,
      { task_id: taskId, owner, ttl_ms: options.ttlMs },
      options.force ? 'force' : '',
    );
    return row ? toLease(row) : null;
  }

  async renew(owner: string, held: readonly TaskLease[], ttlMs: number): Promise<string[]> {
    const kept = new Set<string>();
    for (const part of chunked(held)) {
      const rows = await this.db
        .updateTable('task_leases')
        .set({ expires_at: sql<number>`${this.nowMs} + ${ttlMs}` })
        .where('owner', '=', owner)
        .where('expires_at', '<>', RELEASED)
        .where((eb) =>
          eb.or(part.map((l) => eb.and([eb('task_id', '=', l.task_id), eb('epoch', '=', l.epoch)]))),
        )
        .returning('task_id')
        .execute();
      for (const r of rows) kept.add(r.task_id);
    }
    return held.map((l) => l.task_id).filter((id) => !kept.has(id));
  }

  async release(taskId: string, token: LeaseToken): Promise<void> {
    await this.releaseQuery.execute(this.db, { task_id: taskId, owner: token.owner, epoch: token.epoch });
  }

  async get(taskId: string): Promise<TaskLease | null> {
    const row = await this.db
      .selectFrom('task_leases')
      .selectAll()
      .where('task_id', '=', taskId)
      .where('expires_at', '<>', RELEASED)
      .executeTakeFirst();
    return row ? toLease(row) : null;
  }

  async claimable(taskIds: readonly string[]): Promise<string[]> {
    const live = new Set<string>();
    for (const part of chunked([...new Set(taskIds)])) {
      const rows = await this.db
        .selectFrom('task_leases')
        .select('task_id')
        .where('task_id', 'in', part)
        .where('expires_at', '>', this.nowMs)
        .execute();
      for (const r of rows) live.add(r.task_id);
    }
    return taskIds.filter((id) => !live.has(id));
  }
}
