import { NewEvent, RuntimeEvent } from '@runledger/contracts';
import { TaskProgress } from '../../log/progress';
import type { TaskFold } from '../../log/task-fold';
import { Stop } from '../../ports';

export interface RoundGuardContext {
  progress: TaskProgress;
  /** the task's log; a guard that runs every round reads `fold` instead of walking it */
  events: readonly RuntimeEvent[];
  /** the task's state kept current by its writer */
  fold: TaskFold;
  /** the round about to start */
  round: number;
}

/** What a guard says before a round: events to record (reminders), and optionally a stop. */
export interface GuardVerdict {
  events?: NewEvent[];
  stop?: Stop;
}

/**
 * Run discipline plugs in here. `beforeRound` runs once per round, before the
 * context is built; `beforeEnd` sees every ending and may record events
 * (ACCEPTANCE_DECIDED) and change the stop (completed -> accept_check_failed).
 */
export interface LoopGuard {
  beforeRound?(ctx: RoundGuardContext): Promise<GuardVerdict>;
  beforeEnd?(
    ctx: RoundGuardContext & { stop: Stop; result: string | null },
  ): Promise<{ events?: NewEvent[]; stop?: Stop }>;
  /** milliseconds the task may still run (its end-to-end deadline), null for no limit */
  remainingMs?(ctx: Pick<RoundGuardContext, 'progress' | 'events' | 'fold'>): number | null;
}
