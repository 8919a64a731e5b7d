import { ValidationError } from '@runledger/contracts';
import { LeaseToken, PostgresHandle } from '@runledger/event-store';
import { ClaimOptions, LeaseStore, TaskLease } from '../lease-store';

/** The database's clock in epoch milliseconds: every instance judges expiry by the same clock. */
const NOW_MS = `(extract(epoch from clock_timestamp()) * 1000)::bigint`;

interface LeaseRow {
  task_id: string;
  owner: string;
  epoch: number;
  expires_at: number;
}

const toLease = (r: LeaseRow): TaskLease => ({
  task_id: r.task_id,
  owner: r.owner,
  epoch: Number(r.epoch),
  expires_at: Number(r.expires_at),
});

const checkTtl = (ttlMs: number): void => {
  if (!Number.isInteger(ttlMs) || ttlMs <= 0)
    throw new ValidationError(`ttlMs must be a positive integer, got ${ttlMs}`, { field: 'ttlMs' });
};

/**
 * LeaseStore on PostgreSQL: each operation one statement, so a claim is
 * atomic without a transaction of its own, and times come from the server.
 * An append holding a lease row FOR SHARE (PgEventStore's fencing check)
 * makes a takeover wait until that append committed.
 */
export class PgLeaseStore extends LeaseStore {
  constructor(private readonly handle: PostgresHandle) {
    super();
  }

  async claim(taskId: string, owner: string, options: ClaimOptions): Promise<TaskLease | null> {
    checkTtl(options.ttlMs);
    const { rows } = await this.handle.pool.query<LeaseRow>(
      `INSERT INTO task_leases AS l (task_id, owner, epoch, expires_at)
       VALUES ($1, $2, 1, ${NOW_MS} + $3)
       ON CONFLICT (task_id) DO UPDATE
         SET owner = excluded.owner, epoch = l.epoch + 1, expires_at = excluded.expires_at
         WHERE l.expires_at <= ${NOW_MS} OR $4
       RETURNING task_id, owner, epoch, expires_at`,
      [taskId, owner, options.ttlMs, options.force === true],
    );
    return rows[0] ? toLease(rows[0]) : null;
  }

  async renew(owner: string, held: readonly TaskLease[], ttlMs: number): Promise<string[]> {
    checkTtl(ttlMs);
    if (held.length === 0) return [];
    const { rows } = await this.handle.pool.query<{ task_id: string }>(
      `UPDATE task_leases AS l SET expires_at = ${NOW_MS} + $2
       FROM unnest($3::text[], $4::bigint[]) AS h(task_id, epoch)
       WHERE l.task_id = h.task_id AND l.epoch = h.epoch AND l.owner = $1
       RETURNING l.task_id`,
      [owner, ttlMs, held.map((l) => l.task_id), held.map((l) => l.epoch)],
    );
    const renewed = new Set(rows.map((r) => r.task_id));
    return held.map((l) => l.task_id).filter((id) => !renewed.has(id));
  }

  async release(taskId: string, token: LeaseToken): Promise<void> {
    await this.handle.pool.query('DELETE FROM task_leases WHERE task_id = $1 AND owner = $2 AND epoch = $3', [
      taskId,
      token.owner,
      token.epoch,
    ]);
  }

  async get(taskId: string): Promise<TaskLease | null> {
    const { rows } = await this.handle.pool.query<LeaseRow>(
      'SELECT task_id, owner, epoch, expires_at FROM task_leases WHERE task_id = $1',
      [taskId],
    );
    return rows[0] ? toLease(rows[0]) : null;
  }

  async claimable(taskIds: readonly string[]): Promise<string[]> {
    if (taskIds.length === 0) return [];
    const { rows } = await this.handle.pool.query<{ task_id: string }>(
      `SELECT t.task_id FROM unnest($1::text[]) WITH ORDINALITY AS t(task_id, n)
       LEFT JOIN task_leases l ON l.task_id = t.task_id
       WHERE l.task_id IS NULL OR l.expires_at <= ${NOW_MS}
       ORDER BY t.n`,
      [[...taskIds]],
    );
    return rows.map((r) => r.task_id);
  }
}
