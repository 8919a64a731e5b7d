import { LeaseToken } from '@runledger/event-store';

/** A task's current lease: who may append to it, and until when unless renewed. */
export interface TaskLease extends LeaseToken {
  task_id: string;
  /** epoch milliseconds */
  expires_at: number;
}

export interface ClaimOptions {
  /** how long the claim lasts unless renewed */
  ttlMs: number;
  /** take the lease even from a live owner (the CLI's `resume --force`) */
  force?: boolean;
}

/**
 * Task ownership. Port; one adapter per storage driver (in-memory, SQLite,
 * PostgreSQL), all through the same conformance suite
 * (`runLeaseStoreConformance` in ./testing). A claim succeeds only when the
 * task has no lease, its lease expired or was released, or `force` is set, and
 * always bumps the epoch, so the previous holder's appends are fenced off (the
 * event store compares `AppendOptions.lease` with the row inside the append
 * transaction). A released lease keeps its row, so the epoch keeps counting up.
 * An expired lease stays its owner's (renew keeps it, appends pass) until
 * someone claims it. Times are the database's view of "now" where the adapter
 * can get one, so clock skew between instances does not hand a live task over.
 */
export abstract class LeaseStore {
  /** The new lease, or null when a live lease holds the task (this owner's too) and `force` is not set. */
  abstract claim(taskId: string, owner: string, options: ClaimOptions): Promise<TaskLease | null>;
  /**
   * Extend every lease in `held` that is still this owner's at that epoch by
   * `ttlMs`; returns the task ids among them that were lost (taken over or
   * released), so the owner stops working on them.
   */
  abstract renew(owner: string, held: readonly TaskLease[], ttlMs: number): Promise<string[]>;
  /** Drop the lease if it is still this token's (a task that ended, a process shutting down). */
  abstract release(taskId: string, token: LeaseToken): Promise<void>;
  /** The task's lease, expired or not; null when it has none or it was released. */
  abstract get(taskId: string): Promise<TaskLease | null>;
  /** Of `taskIds`, those with no lease or an expired or released one: what crash recovery may claim. */
  abstract claimable(taskIds: readonly string[]): Promise<string[]>;
}
