import type BetterSqlite3 from 'better-sqlite3';
import { checkLeaseHeld } from '../append-batch';
import { LeaseToken } from '../event-store';

type CurrentLeaseStatement = BetterSqlite3.Statement<[string], { owner: string; epoch: number | bigint }>;

/** one prepared statement per connection: the check runs inside every fenced append */
const statements = new WeakMap<BetterSqlite3.Database, CurrentLeaseStatement>();

/**
 * The fencing check of a SQLite append: call it inside the append's write
 * transaction, before anything is inserted. Throws LeaseLostError unless
 * `lease` is still the task's row in `task_leases` (same owner and epoch); no
 * lease means the append is not fenced. Reading the row inside the transaction
 * that inserts makes check and write one step: a claim by another process
 * commits either before (the check sees the new epoch) or after (the append is
 * already in the log, written while the lease was still held).
 */
export function checkLease(raw: BetterSqlite3.Database, taskId: string, lease: LeaseToken | undefined): void {
  if (lease === undefined) return;
  let current = statements.get(raw);
  if (!current) {
    current = raw.prepare('SELECT owner, epoch FROM task_leases WHERE task_id = ?');
    statements.set(raw, current);
  }
  const row = current.get(taskId);
  checkLeaseHeld(taskId, lease, row ? { owner: row.owner, epoch: Number(row.epoch) } : null);
}
