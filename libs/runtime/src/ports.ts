import { NewEvent, PendingToolOutcome, RuntimeEvent, StopReason, ToolManifest } from '@runledger/contracts';

export interface MemoryHit {
  id: string;
  text: string;
  score: number;
}

/** What the context builder asks memory for. The memory lib plugs its store in; the default recalls nothing. */
export abstract class MemoryRecall {
  abstract recall(query: string, options: { session_id: string; k: number }): Promise<MemoryHit[]>;
}

export class NoMemoryRecall extends MemoryRecall {
  async recall(): Promise<MemoryHit[]> {
    return [];
  }
}

export interface ToolOutcomeContext {
  task_id: string;
  session_id: string;
  /** the TOOL_COMPLETED or TOOL_FAILED about to be recorded, in one append with what the hooks return */
  event: PendingToolOutcome;
  manifest: ToolManifest;
  /** the task's log as its writer folded it: what it handed over and is not committed yet too */
  events: readonly RuntimeEvent[];
}

/**
 * Called on every tool outcome (critic, memory write policy) before it is
 * stored; what it returns is appended with the outcome, in one commit. A
 * failing hook is logged, never fails the task (the outcome is stored alone).
 */
export type ToolOutcomeHook = (ctx: ToolOutcomeContext) => Promise<NewEvent[]>;

export interface Stop {
  stop_reason: StopReason;
  detail: string;
}

/** hard_stop ends the task: permission_denied unless it says otherwise (a budget that ran out) */
export type HardStop = { kind: 'hard_stop'; reason: string; stop_reason?: Stop['stop_reason'] };

export type StepOutcome =
  { kind: 'completed'; output: unknown } | { kind: 'failed'; error: string } | { kind: 'suspend' } | HardStop;

/**
 * The time a run's deadline is judged by: the wall clock live; a replay reads the
 * recorded timestamps instead, so a task stopped by its time budget replays to the same stop.
 */
export interface RunClock {
  now(): Date;
  /** calls `fire` once, when `ms` have passed on this clock; returns what cancels it */
  after(ms: number, fire: () => void): () => void;
}

export const WALL_CLOCK: RunClock = {
  now: () => new Date(),
  after(ms, fire) {
    const timer = setTimeout(fire, ms);
    return () => clearTimeout(timer);
  },
};

/** Secret values for the tool calls waiting on them; memory only, never the log. */
export class SecretVault {
  private readonly values = new Map<string, Map<string, string>>();
  private key = (taskId: string, callId: string) => `${taskId}\u0000${callId}`;

  put(taskId: string, callId: string, name: string, value: string): void {
    const k = this.key(taskId, callId);
    if (!this.values.has(k)) this.values.set(k, new Map());
    this.values.get(k)!.set(name, value);
  }

  forCall(taskId: string, callId: string): ReadonlyMap<string, string> {
    return this.values.get(this.key(taskId, callId)) ?? new Map();
  }

  drop(taskId: string, callId: string): void {
    this.values.delete(this.key(taskId, callId));
  }

  /** every value held now, for whatever task and call */
  held(): string[] {
    return [...this.values.values()].flatMap((byName) => [...byName.values()]);
  }
}

/** detail prefix of a task whose input the permission policy hard-stopped */
export const INPUT_REFUSED = 'input refused: ';
/**
 * Abort reason that leaves the task as it is, for whoever runs it next: this
 * process shutting down (it resumes on the next boot), or, as LeaseLostSignal,
 * another process now owning the task. Nothing is recorded for the interruption.
 */
export class ShutdownSignal extends Error {
  constructor(message = 'shutting down') {
    super(message);
  }
}

/** Abort reason of a task whose lease this process lost (taken over, or the task ended elsewhere). */
export class LeaseLostSignal extends ShutdownSignal {}

/** The abort leaves the task as it is (shutdown, lease lost), not a cancel. */
export const isShutdown = (signal: AbortSignal): boolean =>
  signal.aborted && signal.reason instanceof ShutdownSignal;
