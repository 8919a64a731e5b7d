import { LeaseLostError } from '@runledger/contracts';
import type BetterSqlite3 from 'better-sqlite3';
import { LeaseToken } from '../event-store';

type LeaseRow = { owner: string; epoch: number };

/** one prepared statement per connection: the append path runs this per fenced append */
const statements = new WeakMap<BetterSqlite3.Database, BetterSqlite3.Statement<[string], LeaseRow>>();

/**
 * Fencing, inside the append transaction: the task's current lease row must be
 * exactly the writer's (owner and epoch), or the append is refused with
 * LeaseLostError before it writes anything. Another process that claimed the
 * task bumped the epoch, so a writer that lost its lease can never write again.
 */
export function checkLeaseFence(raw: BetterSqlite3.Database, taskId: string, lease: LeaseToken): void {
  let stmt = statements.get(raw);
  if (!stmt) {
    stmt = raw.prepare<[string], LeaseRow>('SELECT owner, epoch FROM task_leases WHERE task_id = ?');
    statements.set(raw, stmt);
  }
  const row = stmt.get(taskId);
  const current = row ? { owner: row.owner, epoch: Number(row.epoch) } : null;
  if (current?.owner !== lease.owner || current.epoch !== lease.epoch)
    throw new LeaseLostError(taskId, { owner: lease.owner, epoch: lease.epoch }, current);
}
