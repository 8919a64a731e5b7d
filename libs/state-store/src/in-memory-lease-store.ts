import { CurrentLeases, LeaseToken } from '@runledger/event-store';
import { ClaimOptions, LeaseStore, TaskLease } from './lease-store';

/** expires_at of a released lease: expired for everyone, and not renewable by its last owner */
const RELEASED = 0;

/**
 * Reference adapter, in memory. It is also the CurrentLeases an
 * InMemoryEventStore fences its appends against:
 * `const leases = new InMemoryLeaseStore(); new InMemoryEventStore(leases)`.
 */
export class InMemoryLeaseStore extends LeaseStore implements CurrentLeases {
  private readonly rows = new Map<string, TaskLease>();

  constructor(private readonly now: () => number = Date.now) {
    super();
  }

  async claim(taskId: string, owner: string, options: ClaimOptions): Promise<TaskLease | null> {
    const row = this.rows.get(taskId);
    if (row && row.expires_at > this.now() && !options.force) return null;
    const lease = {
      task_id: taskId,
      owner,
      epoch: (row?.epoch ?? 0) + 1,
      expires_at: this.now() + options.ttlMs,
    };
    this.rows.set(taskId, lease);
    return { ...lease };
  }

  async renew(owner: string, held: readonly TaskLease[], ttlMs: number): Promise<string[]> {
    const lost: string[] = [];
    for (const lease of held) {
      const row = this.rows.get(lease.task_id);
      if (row && row.owner === owner && row.epoch === lease.epoch && row.expires_at !== RELEASED)
        row.expires_at = this.now() + ttlMs;
      else lost.push(lease.task_id);
    }
    return lost;
  }

  async release(taskId: string, token: LeaseToken): Promise<void> {
    const row = this.rows.get(taskId);
    if (row && row.owner === token.owner && row.epoch === token.epoch) row.expires_at = RELEASED;
  }

  async get(taskId: string): Promise<TaskLease | null> {
    const row = this.rows.get(taskId);
    return row && row.expires_at !== RELEASED ? { ...row } : null;
  }

  async claimable(taskIds: readonly string[]): Promise<string[]> {
    const now = this.now();
    return taskIds.filter((id) => (this.rows.get(id)?.expires_at ?? RELEASED) <= now);
  }

  current(taskId: string): LeaseToken | null {
    const row = this.rows.get(taskId);
    return row ? { owner: row.owner, epoch: row.epoch } : null;
  }
}
