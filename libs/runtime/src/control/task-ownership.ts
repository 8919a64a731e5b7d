import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { LeaseToken } from '@runledger/event-store';
import { LeaseStore, TaskLease } from '@runledger/state-store';
import { RuntimeLogger } from '../runtime-logger';

export interface OwnershipSettings {
  /** how often held leases are renewed (RUNLEDGER_LEASE_RENEW_MS); also how often crash recovery looks for tasks nobody runs */
  renewMs: number;
  /** how long a lease lasts without renewal (RUNLEDGER_LEASE_TTL_MS); another process may take the task after that */
  ttlMs: number;
  /** this process's owner id; hostname:pid:random when absent */
  owner?: string;
}

export const DEFAULT_OWNERSHIP: OwnershipSettings = { renewMs: 5_000, ttlMs: 20_000 };

/** Unique per process, readable in the task_leases table: which host, which pid. */
export const newOwnerId = (): string => `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;

/**
 * The leases this process holds on the tasks it runs: claims them, renews them
 * all on one heartbeat, releases them, and reports a lease found lost (taken
 * over by another process, or refused to an append) to `onLost` once, so the
 * runtime stops working on that task. A failed renewal is retried on the next
 * beat; past the TTL another process may claim the task, and fencing refuses
 * this one's appends from then on.
 */
export class TaskOwnership {
  readonly owner: string;
  readonly settings: OwnershipSettings;
  private readonly held = new Map<string, TaskLease>();
  private heartbeat: NodeJS.Timeout | null = null;
  private renewing: Promise<void> | null = null;
  /** releases still being written, by task: a claim of the same task waits for its release first */
  private readonly releasing = new Map<string, Promise<void>>();
  private lostListener: (taskId: string) => void = () => undefined;
  private closed = false;

  constructor(
    private readonly leases: LeaseStore,
    private readonly logger: RuntimeLogger,
    settings: Partial<OwnershipSettings> = {},
  ) {
    this.settings = { ...DEFAULT_OWNERSHIP, ...settings };
    this.owner = this.settings.owner ?? newOwnerId();
  }

  /** Who hears of a lost lease (the runtime controller: it aborts the task's run). */
  onLost(listener: (taskId: string) => void): void {
    this.lostListener = listener;
  }

  holds(taskId: string): boolean {
    return this.held.has(taskId);
  }

  tokenOf(taskId: string): LeaseToken | undefined {
    const lease = this.held.get(taskId);
    return lease && { owner: lease.owner, epoch: lease.epoch };
  }

  /**
   * Take the task unless a live lease holds it (`force`: even then, bumping the
   * epoch). True when this process holds it afterwards, also when it already did.
   */
  async claim(taskId: string, options: { force?: boolean } = {}): Promise<boolean> {
    if (this.held.has(taskId)) return true;
    if (this.closed) return false;
    await this.releasing.get(taskId);
    const lease = await this.leases.claim(taskId, this.owner, {
      ttlMs: this.settings.ttlMs,
      force: options.force,
    });
    if (!lease) return false;
    this.held.set(taskId, lease);
    if (this.closed) {
      // closed while the claim was in flight: nobody would renew it
      await this.release(taskId);
      return false;
    }
    this.startHeartbeat();
    return true;
  }

  /** Of `taskIds`, those no live lease holds (crash recovery may take them). */
  claimable(taskIds: readonly string[]): Promise<string[]> {
    return this.leases.claimable(taskIds);
  }

  /** The live lease on the task, null when nobody holds it (or only an expired or released lease is left). */
  async liveLease(taskId: string): Promise<TaskLease | null> {
    if ((await this.leases.claimable([taskId])).length > 0) return null;
    return this.leases.get(taskId);
  }

  /** Give the task up (it ended, it waits for a person, the process stops); a failure is logged, the lease then expires. */
  release(taskId: string): Promise<void> {
    const lease = this.held.get(taskId);
    if (!lease) return Promise.resolve();
    this.held.delete(taskId);
    const done = this.leases
      .release(taskId, lease)
      .catch((err: unknown) => this.logger.warn({ task_id: taskId, err }, 'lease not released; it expires'))
      .finally(() => {
        if (this.releasing.get(taskId) === done) this.releasing.delete(taskId);
      });
    this.releasing.set(taskId, done);
    return done;
  }

  /** An append was refused for this task's lease: forget it and tell the runtime, once. */
  lost(taskId: string, epoch: number): void {
    if (this.held.get(taskId)?.epoch !== epoch) return;
    this.held.delete(taskId);
    this.lostListener(taskId);
  }

  /** Renew every held lease now; the ones found lost are reported. */
  renew(): Promise<void> {
    this.renewing ??= this.renewHeld().finally(() => (this.renewing = null));
    return this.renewing;
  }

  /** Stop the heartbeat and release every held lease, so another process (or this one restarted) resumes at once. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = null;
    await this.renewing;
    await Promise.all([...this.held.keys()].map((taskId) => this.release(taskId)));
    await Promise.all([...this.releasing.values()]);
  }

  private startHeartbeat(): void {
    if (this.heartbeat) return;
    this.heartbeat = setInterval(() => void this.renew(), this.settings.renewMs);
    this.heartbeat.unref();
  }

  private async renewHeld(): Promise<void> {
    const snapshot = [...this.held.values()];
    if (snapshot.length === 0) return;
    let lostIds: string[];
    try {
      lostIds = await this.leases.renew(this.owner, snapshot, this.settings.ttlMs);
    } catch (err) {
      this.logger.warn({ err, leases: snapshot.length }, 'lease renewal failed; retrying on the next beat');
      return;
    }
    for (const taskId of lostIds) {
      // released or claimed again while the renewal ran: not the lease that was renewed
      const epoch = snapshot.find((l) => l.task_id === taskId)!.epoch;
      this.lost(taskId, epoch);
    }
  }
}

/** The owner id of another process that holds a live lease on the task, null when none does (or without leases). */
export async function ownedElsewhere(
  ownership: TaskOwnership | null,
  taskId: string,
): Promise<string | null> {
  if (!ownership || ownership.holds(taskId)) return null;
  return (await ownership.liveLease(taskId))?.owner ?? null;
}
