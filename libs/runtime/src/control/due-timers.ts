/** the longest a Node timer waits; a later due time is looked at again when this one fires */
const MAX_TIMEOUT_MS = 2_147_483_647;

/**
 * The due times of the timers this process knows of (from the log's commits and the recovery
 * sweep), with one wall-clock timeout armed for the earliest. What comes due is handed to `fire`,
 * which decides from the log whether it is still to fire: a task dropped or fired elsewhere meanwhile
 * costs one read.
 */
export class DueTimers {
  private readonly due = new Map<string, number>();
  private timeout: NodeJS.Timeout | null = null;
  private armedAt = Infinity;
  private stopped = false;

  constructor(
    private readonly fire: (taskId: string) => void,
    private readonly now: () => number = Date.now,
  ) {}

  arm(taskId: string, dueAt: string): void {
    if (this.stopped) return;
    this.due.set(taskId, Date.parse(dueAt));
    this.schedule();
  }

  drop(taskId: string): void {
    this.due.delete(taskId);
  }

  stop(): void {
    this.stopped = true;
    this.due.clear();
    if (this.timeout) clearTimeout(this.timeout);
    this.timeout = null;
  }

  private schedule(): void {
    let next = Infinity;
    for (const at of this.due.values()) next = Math.min(next, at);
    if (next === Infinity || (this.timeout && next >= this.armedAt)) return;
    if (this.timeout) clearTimeout(this.timeout);
    this.armedAt = next;
    this.timeout = setTimeout(() => this.wake(), Math.min(MAX_TIMEOUT_MS, Math.max(0, next - this.now())));
    this.timeout.unref();
  }

  private wake(): void {
    this.timeout = null;
    this.armedAt = Infinity;
    const now = this.now();
    for (const [taskId, at] of [...this.due]) {
      if (at > now) continue;
      this.due.delete(taskId);
      this.fire(taskId);
    }
    this.schedule();
  }
}
